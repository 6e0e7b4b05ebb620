import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type CliRun, createCliRunner } from '../../helpers/cli-process.ts';
import { registerProject, startTestHost, type TestHost } from '../../helpers/host.ts';
import { tempDirMaker } from '../../helpers/temp-dirs.ts';
import { eventually } from '../../helpers/wait.ts';

const { spawnCli, cli, killAll } = createCliRunner();

const tempDir = tempDirMaker('sync-status-');

describe('sync-host status: what the running syncs say about their folders', () => {
  let th: TestHost;
  const config = { one: '', two: '' };

  beforeAll(async () => {
    th = await startTestHost({ ui: false });
    const one = await th.signIn('status@example.org', 'one');
    const two = await th.signIn('status@example.org', 'two');
    await registerProject(th.base, one.deviceToken, 'notes');
    config.one = tempDir();
    config.two = tempDir();
    for (const [dir, t] of [
      [config.one, one.deviceToken],
      [config.two, two.deviceToken],
    ] as const) {
      expect((await cli(['login', '--auth', th.base, '--token', t], dir)).code).toBe(0);
    }
  });

  afterEach(() => killAll());

  afterAll(async () => {
    killAll();
    await th?.close();
  });

  const startSync = (configDir: string, folder: string): CliRun =>
    spawnCli(['sync', 'notes', folder, '--relay', th.relayUrl], configDir);

  it('says when nothing runs: every sync (exit 0) or the one named (exit 1, one line)', async () => {
    const none = await cli(['status'], config.one);
    expect(none).toMatchObject({ code: 0, stdout: 'no sync is running for this device\n' });
    const json = await cli(['status', '--json'], config.one);
    expect(JSON.parse(json.stdout)).toEqual([]);
    const named = await cli(['status', 'notes'], config.one);
    expect(named.code).toBe(1);
    expect(named.stderr.trim().split('\n')).toEqual([
      'sync-host status: no sync of "notes" is running for this device (start one: sync-host sync notes <dir>) (not_running)',
    ]);
  });

  it('lists the connection, the devices, what waits and the conflict copies', async () => {
    const folder = { one: tempDir(), two: tempDir() };
    // The same name with other content on both before the first sync: a conflict copy.
    writeFileSync(join(folder.one, 'plan.md'), 'plan of one\n');
    writeFileSync(join(folder.two, 'plan.md'), 'plan of two\n');
    const one = startSync(config.one, folder.one);
    const two = startSync(config.two, folder.two);
    type Shown = {
      projectKey: string;
      folder: string;
      state: string;
      devices: string[];
      inSync: boolean;
      waitingUp: { files: number; bytes: number };
      waitingDown: { files: number; bytes: number };
      conflicts: string[];
    };
    const shown = await eventually(
      async () => {
        const run = await cli(['status', 'notes', '--json'], config.one);
        if (run.code !== 0) return undefined;
        const status = JSON.parse(run.stdout) as Shown;
        return status.inSync && status.conflicts.length === 1 && status.waitingUp.files === 0
          ? status
          : undefined;
      },
      'one in step with a conflict copy and nothing waiting',
      30_000,
    );
    expect(shown).toMatchObject({
      projectKey: 'notes',
      state: 'joined',
      waitingDown: { files: 0, bytes: 0 },
    });
    expect(shown.folder).toContain('sync-status-');
    expect(shown.devices).toHaveLength(2);
    expect(shown.conflicts[0]).toMatch(/^plan\.sync-conflict-\d{8}-\d{6}-\d+\.md$/);

    const all = await cli(['status'], config.two);
    expect(all.code).toBe(0);
    expect(all.stdout).toContain(`notes: ${folder.two}`);
    expect(all.stdout).toContain('connected as device');
    // The other device by its id, never a bare number that reads as a count.
    const other = shown.devices.find(
      (device) => !all.stdout.includes(`connected as device ${device};`),
    );
    // The device by id, then who it is (its user's e-mail, its name, the user's role).
    expect(all.stdout).toMatch(
      new RegExp(`; other devices online: device ${other} \\([^)]*, owner\\)\n`),
    );
    expect(all.stdout).toContain('conflict copies: 1');
    expect(all.stdout).toContain(`    ${shown.conflicts[0]}`);

    // A file written here is counted until the relay confirmed it, then no longer.
    writeFileSync(join(folder.two, 'new.md'), 'twelve bytes');
    await eventually(() => existsSync(join(folder.one, 'new.md')), 'new.md at one', 15_000);
    await eventually(
      async () => {
        const run = await cli(['status', 'notes', '--json'], config.two);
        return (JSON.parse(run.stdout) as Shown).waitingUp.files === 0;
      },
      'nothing waiting at two',
      15_000,
    );
    for (const run of [one, two]) run.child.kill('SIGTERM');
    for (const run of [one, two]) expect(await run.exited).toBe(0);
  }, 90_000);
});
