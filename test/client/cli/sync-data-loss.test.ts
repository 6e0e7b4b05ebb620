import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type * as Y from 'yjs';
import { FolderDevice, textFiles } from '../../folder/devices.ts';
import type { CliRun } from '../../helpers/cli-process.ts';
import { eventually } from '../../helpers/wait.ts';
import { agreed, type CliDevice, readIf, syncScope, tree } from './sync-peers.ts';

const scope = syncScope('data-loss@example.org');

const conflictCopy = /^meeting\.sync-conflict-\d{8}-\d{6}-(\d+)\.md$/;

describe('sync-host sync: no text lost between two devices', () => {
  const devices: { a?: CliDevice; b?: CliDevice } = {};
  let base = '';

  beforeAll(async () => {
    base = scope.tempDir();
    devices.a = await scope.device('laptop', join(base, 'config-a'));
    devices.b = await scope.device('desktop', join(base, 'config-b'));
  });

  /** A new project and a folder for each device. */
  async function pair() {
    const a = devices.a!;
    const b = devices.b!;
    const { key } = await scope.project(a);
    const dirA = join(base, `${key}-a`, 'Notes');
    const dirB = join(base, `${key}-b`, 'Notes');
    mkdirSync(dirA, { recursive: true });
    mkdirSync(dirB, { recursive: true });
    return {
      dirA,
      dirB,
      startA: () => scope.sync(a, key, dirA),
      startB: () => scope.sync(b, key, dirB),
    };
  }

  async function stop(run: CliRun): Promise<void> {
    run.child.kill('SIGTERM');
    expect(await run.exited).toBe(0);
  }

  it('keeps one file when both folders already had it with the same text', async () => {
    const { dirA, dirB, startA, startB } = await pair();
    writeFileSync(join(dirA, 'meeting.md'), '# Meeting\nagenda\n');
    writeFileSync(join(dirB, 'meeting.md'), '# Meeting\nagenda\n');
    await startA();
    await startB();
    expect(await agreed([dirA, dirB])).toEqual({ 'meeting.md': '# Meeting\nagenda\n' });
  });

  it('keeps both when both folders already had it with other text, one as a conflict copy', async () => {
    const { dirA, dirB, startA, startB } = await pair();
    writeFileSync(join(dirA, 'meeting.md'), 'laptop notes\n');
    writeFileSync(join(dirB, 'meeting.md'), 'desktop notes\n');
    await startA();
    await startB();
    const files = await agreed([dirA, dirB]);
    expect(Object.values(files).sort()).toEqual(['desktop notes\n', 'laptop notes\n']);
    const copy = Object.keys(files).find((name) => conflictCopy.test(name));
    expect(Object.keys(files).sort()).toEqual([copy, 'meeting.md'].sort());
    // The copy is named by the device whose text it holds.
    const device = Number(conflictCopy.exec(copy ?? '')?.[1]);
    const owner = device === devices.a!.deviceId ? 'laptop notes\n' : 'desktop notes\n';
    expect([devices.a!.deviceId, devices.b!.deviceId]).toContain(device);
    expect(files[copy!]).toBe(owner);
  });

  it('settles a file on one device against a folder of that name on the other', async () => {
    const { dirA, dirB, startA, startB } = await pair();
    writeFileSync(join(dirA, 'x'), 'the file x\n');
    mkdirSync(join(dirB, 'x'));
    writeFileSync(join(dirB, 'x', 'y.md'), 'inside the folder x\n');
    const a = await startA();
    const b = await startB();
    const files = await agreed([dirA, dirB]);
    const copy = Object.keys(files).find((name) => /^x\.sync-conflict-\d{8}-\d{6}-\d+$/.test(name));
    expect(files).toEqual({ 'x/y.md': 'inside the folder x\n', [copy ?? 'x']: 'the file x\n' });
    expect(copy).toBeDefined();
    expect([a.child.exitCode, b.child.exitCode]).toEqual([null, null]);
  });

  it('keeps both texts of a file made on both running devices at once', async () => {
    const { dirA, dirB, startA, startB } = await pair();
    const a = await startA();
    const b = await startB();
    await eventually(() => /peers: \d/.test(a.out.stdout) && /peers: \d/.test(b.out.stdout));
    writeFileSync(join(dirA, 'idea.md'), 'from the laptop\n');
    writeFileSync(join(dirB, 'idea.md'), 'from the desktop\n');
    const files = await agreed([dirA, dirB]);
    const all = Object.values(files).join('');
    expect(all).toContain('from the laptop\n');
    expect(all).toContain('from the desktop\n');
  });

  it('keeps an edit made while the other device deleted the file, both online', async () => {
    const { dirA, dirB, startA, startB } = await pair();
    writeFileSync(join(dirA, 'plan.md'), 'step one\n');
    await startA();
    await startB();
    await agreed([dirA, dirB]);
    rmSync(join(dirA, 'plan.md'));
    writeFileSync(join(dirB, 'plan.md'), 'step one\nstep two\n');
    expect(await agreed([dirA, dirB])).toEqual({ 'plan.md': 'step one\nstep two\n' });
  });

  it('keeps an edit made offline while the other device deleted the file', async () => {
    const { dirA, dirB, startA, startB } = await pair();
    writeFileSync(join(dirA, 'plan.md'), 'step one\n');
    const a = await startA();
    let b = await startB();
    await agreed([dirA, dirB]);
    await stop(b);
    writeFileSync(join(dirB, 'plan.md'), 'step one\nstep two offline\n');
    rmSync(join(dirA, 'plan.md'));
    await eventually(() => a.out.stdout.includes('sent plan.md (deleted)'), 'the delete sent');
    b = await startB();
    expect(await agreed([dirA, dirB])).toEqual({ 'plan.md': 'step one\nstep two offline\n' });
  });

  it('never doubles an edit that arrived just before a kill -9', async () => {
    const { dirA, dirB, startA, startB } = await pair();
    writeFileSync(join(dirA, 'log.md'), 'line 0\n');
    await startA();
    let b = await startB();
    await agreed([dirA, dirB]);
    let expected = 'line 0\n';
    for (let round = 1; round <= 3; round += 1) {
      // Killed the moment it says it wrote the edit.
      const run = b;
      run.child.stdout.on('data', (chunk: Buffer) => {
        if (String(chunk).includes('received log.md')) run.child.kill('SIGKILL');
      });
      expected += `line ${round}\n`;
      writeFileSync(join(dirA, 'log.md'), expected);
      expect(await run.exited).toBeNull();
      b = await startB();
      expect(await agreed([dirA, dirB])).toEqual({ 'log.md': expected });
    }
    // Both still edit it, once each.
    writeFileSync(join(dirB, 'log.md'), `${expected}from b\n`);
    expect(await agreed([dirA, dirB])).toEqual({ 'log.md': `${expected}from b\n` });
  }, 60_000);

  it('puts a 2,000-byte file in place whole, never empty or half written', async () => {
    const { dirA, dirB, startA, startB } = await pair();
    await startA();
    await startB();
    const file = join(dirB, 'big.md');
    const seen = new Set<number>();
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const content = readIf(file);
        if (content !== undefined) seen.add(Buffer.byteLength(content));
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();
    const first = `${randomBytes(1_000).toString('hex').slice(0, 1_999)}\n`;
    writeFileSync(join(dirA, 'big.md'), first);
    await eventually(() => readIf(file) === first, 'big.md at b', 10_000);
    const second = `${first.slice(0, 1_000)}${'y'.repeat(1_000)}`;
    writeFileSync(join(dirA, 'big.md'), second);
    await eventually(() => readIf(file) === second, 'the new big.md at b', 10_000);
    watching = false;
    await watcher;
    expect([...seen]).toEqual([2_000]);
  });

  it('removes folders emptied by deletes on another device, and follows a folder rename', async () => {
    const { dirA, dirB, startA, startB } = await pair();
    mkdirSync(join(dirA, 'trip', 'day1'), { recursive: true });
    writeFileSync(join(dirA, 'trip', 'day1', 'a.md'), 'beach\n');
    writeFileSync(join(dirA, 'trip', 'b.md'), 'hotel\n');
    mkdirSync(join(dirA, 'drafts'));
    writeFileSync(join(dirA, 'drafts', 'one.md'), 'draft one\n');
    writeFileSync(join(dirA, 'drafts', 'two.md'), 'draft two\n');
    await startA();
    await startB();
    await agreed([dirA, dirB]);
    rmSync(join(dirA, 'trip', 'day1', 'a.md'));
    rmSync(join(dirA, 'trip', 'b.md'));
    renameSync(join(dirA, 'drafts'), join(dirA, 'final'));
    expect(await agreed([dirA, dirB])).toEqual({
      'final/one.md': 'draft one\n',
      'final/two.md': 'draft two\n',
    });
    await eventually(() => !existsSync(join(dirB, 'drafts')), 'drafts gone at b');
    expect(existsSync(join(dirB, 'trip'))).toBe(false);
    expect(tree(dirB)).toEqual({
      final: 'folder',
      'final/one.md': 'draft one\n',
      'final/two.md': 'draft two\n',
    });
  });

  it('deletes nothing elsewhere when its folder disappears while it runs', async () => {
    const { dirA, dirB, startA, startB } = await pair();
    for (const name of ['1.md', '2.md', '3.md']) writeFileSync(join(dirA, name), `${name}\n`);
    const a = await startA();
    await startB();
    const three = await agreed([dirA, dirB]);
    // Moved away (or its disk unmounted): A reads the folder again when B's new file arrives.
    renameSync(dirA, `${dirA}-moved`);
    writeFileSync(join(dirB, 'from-b.md'), 'from b\n');
    await eventually(
      () => a.out.stderr.includes('is gone or not mounted'),
      'a saying its folder is gone',
      10_000,
    );
    expect(a.out.stdout).not.toContain('(deleted)');
    expect(textFiles(dirB)).toEqual({ ...three, 'from-b.md': 'from b\n' });
    // Back in place: A catches up.
    renameSync(`${dirA}-moved`, dirA);
    expect(await agreed([dirA, dirB])).toEqual({ ...three, 'from-b.md': 'from b\n' });
  });

  it('deletes nothing elsewhere when it starts on its folder emptied (a disk not mounted)', async () => {
    const { dirA, dirB, startA, startB } = await pair();
    for (const name of ['1.md', '2.md', '3.md']) writeFileSync(join(dirA, name), `${name}\n`);
    const a = await startA();
    await startB();
    const three = await agreed([dirA, dirB]);
    await stop(a);
    renameSync(dirA, `${dirA}-elsewhere`);
    mkdirSync(dirA);
    const again = await startA();
    writeFileSync(join(dirB, 'from-b.md'), 'from b\n');
    // Without the marker sync writes at its first start, the folder is taken for not mounted:
    // nothing is sent or written until the disk is back.
    await eventually(
      () => again.out.stderr.includes('is gone or not mounted'),
      'a saying its folder is not mounted',
      10_000,
    );
    expect(readdirSync(dirA)).toEqual([]);
    rmdirSync(dirA);
    renameSync(`${dirA}-elsewhere`, dirA);
    expect(await agreed([dirA, dirB])).toEqual({ ...three, 'from-b.md': 'from b\n' });
    expect(again.out.stdout).not.toContain('(deleted)');
  });

  it('skips a symbolic link with one line and never syncs what it points at', async () => {
    const { dirA, dirB, startA, startB } = await pair();
    const outside = join(base, `outside-${randomBytes(4).toString('hex')}`);
    const secret = `SECRET-${randomBytes(8).toString('hex')}`;
    mkdirSync(outside);
    writeFileSync(join(outside, 'secret.md'), `${secret}\n`);
    symlinkSync(join(outside, 'secret.md'), join(dirA, 'linked.md'));
    symlinkSync(outside, join(dirA, 'linked-folder'));
    writeFileSync(join(dirA, 'plain.md'), 'plain\n');
    const a = await startA();
    await startB();
    expect(await agreed([dirA, dirB])).toEqual({ 'plain.md': 'plain\n' });
    for (const name of ['more-1.md', 'more-2.md']) {
      writeFileSync(join(dirA, name), `${name}\n`);
      await eventually(() => readIf(join(dirB, name)) === `${name}\n`, `${name} at b`, 10_000);
    }
    const lines = a.out.stderr.split('\n');
    expect(lines.filter((line) => /^skipped linked\.md\b.*symbolic link/.test(line))).toHaveLength(
      1,
    );
    expect(
      lines.filter((line) => /^skipped linked-folder\b.*symbolic link/.test(line)),
    ).toHaveLength(1);
    expect(JSON.stringify(tree(dirB))).not.toContain(secret);
    expect(readFileSync(join(outside, 'secret.md'), 'utf8')).toBe(`${secret}\n`);
  });

  it('merges each save made here while changes arrived, twice in one second', async () => {
    const victim = await scope.device('racer');
    const attackerDevice = await scope.device('racer-peer');
    const { roomId } = await scope.project(victim);
    const dir = join(base, 'race');
    // Between the record of a batch and its writes, the user saves the file (the hook).
    let saving: string | undefined;
    const device = new FolderDevice(scope.host(), roomId, victim, dir, join(base, 'race.log'), {
      now: () => 1_800_000_000_000,
      onRecorded: () => {
        if (saving !== undefined) writeFileSync(join(dir, 'race.md'), saving);
        saving = undefined;
      },
    });
    const peer = await scope.attacker(roomId, attackerDevice);
    try {
      await device.start();
      const id = peer.entry('race.md', 'base\n');
      await eventually(() => readIf(join(dir, 'race.md')) === 'base\n', 'race.md here');
      const text = (peer.files.get(id) as Y.Map<unknown>).get('text') as Y.Text;
      for (const round of [1, 2]) {
        // The save replaces the first line; the peer adds a line at the end meanwhile.
        const before = readIf(join(dir, 'race.md'))!;
        saving = before.replace(/^[^\n]*\n/, `saved here ${round}\n`);
        text.insert(text.length, `from the peer ${round}\n`);
        await eventually(() => saving === undefined, `the save of round ${round}`);
        await eventually(() => readIf(join(dir, 'race.md'))?.includes(`peer ${round}`));
        device.scan();
      }
      // Each save merged with what arrived, never written over, never a conflict copy.
      expect(textFiles(dir)).toEqual({
        'race.md': 'saved here 2\nfrom the peer 1\nfrom the peer 2\n',
      });
    } finally {
      await device.stop();
    }
  });
});
