import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as Y from 'yjs';
import { maxNewFilesVariable } from '../../../client/cli/sync-command.ts';
import { FolderDevice } from '../../folder/devices.ts';
import { createCliRunner } from '../../helpers/cli-process.ts';
import { eventually } from '../../helpers/wait.ts';
import type { Attacker } from './sync-peers.ts';
import { syncScope } from './sync-peers.ts';

const scope = syncScope('flood@example.org');

/** `count` tiny new files from the attacker, in one transaction. */
function flood(attacker: Attacker, count: number): void {
  attacker.doc.transact(() => {
    for (let i = 0; i < count; i += 1) {
      const map = new Y.Map<unknown>();
      map.set('path', `f${i}.md`);
      map.set('text', new Y.Text('x'));
      map.set('time', 1);
      map.set('device', 'attacker');
      attacker.files.set(`flood${i}`, map);
    }
  });
}

function fileCount(dir: string): number {
  return readdirSync(dir).filter((name) => !name.startsWith('.')).length;
}

describe('sync-host sync: new files from another device are capped per minute', () => {
  it('writes no more than the cap in the first minute, says so once, and follows with the rest', async () => {
    const th = scope.host();
    const victim = await scope.device('victim');
    const attackerDevice = await scope.device('attacker');
    const { roomId } = await scope.project(victim);
    const base = scope.tempDir();
    let nowMs = 1_000_000;
    const device = new FolderDevice(th, roomId, victim, join(base, 'notes'), join(base, 'state'), {
      limits: { filesPerMinute: 100, bytesPerMinute: 1 << 30 },
      now: () => nowMs,
    });
    const attacker = await scope.attacker(roomId, attackerDevice);
    try {
      await device.start();
      await eventually(() => device.joined, 'the victim joined');
      flood(attacker, 20_000);
      await eventually(() => fileCount(device.dir) === 100, '100 files written', 20_000);
      const holding = () => device.lines.filter((line) => line.startsWith('holding'));
      expect(holding()).toEqual([expect.stringMatching(/^holding 19900 new file\(s\)/)]);
      // Through the rest of the first minute, scans (as the CLI's rescan makes) write no more.
      for (let second = 5; second < 60; second += 5) {
        nowMs += 5_000;
        device.scan();
        expect(fileCount(device.dir)).toBeLessThanOrEqual(100);
      }
      // The next minute brings the next 100, and the line is not repeated.
      nowMs += 60_000;
      device.scan();
      expect(fileCount(device.dir)).toBeGreaterThan(100);
      expect(fileCount(device.dir)).toBeLessThanOrEqual(200);
      expect(holding()).toHaveLength(1);
    } finally {
      await device.stop();
    }
  }, 60_000);

  it('holds files past SYNC_HOST_MAX_NEW_FILES (5,000) a minute with one line from the CLI', async () => {
    const victim = await scope.device('cli-victim', join(scope.tempDir(), 'config'));
    const attackerDevice = await scope.device('cli-attacker');
    const { key, roomId } = await scope.project(victim);
    const notes = join(scope.tempDir(), 'notes');
    const run = await scope.sync(victim, key, notes, { [maxNewFilesVariable]: '5000' });
    const attacker = await scope.attacker(roomId, attackerDevice);
    const started = Date.now();
    flood(attacker, 20_000);
    await eventually(() => run.out.stderr.includes('holding'), 'the holding line', 30_000);
    await eventually(() => fileCount(notes) >= 5_000, '5,000 files written', 30_000);
    // The bucket refills evenly: what a minute's share of the time since adds, no more.
    const allowed = 5_000 + Math.ceil(((Date.now() - started) / 60_000) * 5_000);
    expect(fileCount(notes)).toBeLessThanOrEqual(allowed);
    // One line, counting what was held when it was written (the bucket refills as it writes).
    const held = run.out.stderr.match(/^holding (\d+) new file\(s\) from other devices: .*$/gm);
    expect(held).toHaveLength(1);
    expect(Number(/\d+/.exec(held?.[0] ?? '')?.[0])).toBeGreaterThanOrEqual(20_000 - allowed);
    expect(held?.[0]).toContain('more than 5000 files');
    expect(run.child.exitCode).toBeNull();
  }, 60_000);

  it('refuses a SYNC_HOST_MAX_NEW_FILES that is not a whole number: one line, exit 2, nothing made', async () => {
    const device = await scope.device('cli-bad-limit', join(scope.tempDir(), 'config'));
    const { key } = await scope.project(device);
    const notes = join(scope.tempDir(), 'notes');
    const runner = createCliRunner();
    for (const value of ['lots', '0', '-5', '1e3']) {
      const run = runner.spawnCli(
        ['sync', key, notes, '--relay', scope.host().relayUrl],
        device.config,
        { [maxNewFilesVariable]: value },
      );
      run.child.stdin.end();
      expect(await run.exited).toBe(2);
      expect(run.out.stderr.trim().split('\n')).toEqual([
        expect.stringContaining(`${maxNewFilesVariable} takes a whole number of files`),
      ]);
      expect(existsSync(notes)).toBe(false);
    }
    runner.killAll();
  }, 60_000);
});
