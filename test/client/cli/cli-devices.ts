import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, expect } from 'vitest';
import { type CliRun, createCliRunner } from '../../helpers/cli-process.ts';
import { registerProject, startTestHost, type TestHost } from '../../helpers/host.ts';
import { eventually } from '../../helpers/wait.ts';

/**
 * For a test file of `sync-host` processes: an in-process host with a project `files` and two
 * devices of one user (`one`, `two`), each logged in with the CLI in its own config folder and
 * with its own folder to sync. Processes, hosts and temporary folders end with the tests.
 */
export function cliDevices(name: string, env?: Record<string, string>) {
  const runner = createCliRunner({ env });
  const temps: string[] = [];
  const hosts: TestHost[] = [];
  const tempDir = (): string => {
    const dir = mkdtempSync(join(tmpdir(), `${name}-`));
    temps.push(dir);
    return dir;
  };
  afterEach(() => runner.killAll());
  afterAll(async () => {
    runner.killAll();
    for (const th of hosts) await th.close();
    for (const dir of temps) rmSync(dir, { recursive: true, force: true });
  });

  /** `relay`: relay.conf lines; `syncArgs`: added to every `sync` (`--encrypt …`). */
  async function setUp(options: { relay?: string[]; syncArgs?: string[] } = {}) {
    const th = await startTestHost({ ui: false, relay: options.relay ?? [] });
    hosts.push(th);
    const config = { one: tempDir(), two: tempDir() };
    const folder = { one: tempDir(), two: tempDir() };
    const one = await th.signIn(`${name}@example.org`, 'one');
    const two = await th.signIn(`${name}@example.org`, 'two');
    const { roomId } = await registerProject(th.base, one.deviceToken, 'files');
    for (const [dir, t] of [
      [config.one, one.deviceToken],
      [config.two, two.deviceToken],
    ] as const) {
      expect((await runner.cli(['login', '--auth', th.base, '--token', t], dir)).code).toBe(0);
    }
    /** `env`: added to this process's environment. */
    const start = (which: 'one' | 'two', env?: Record<string, string>): CliRun =>
      runner.spawnCli(
        ['sync', 'files', folder[which], '--relay', th.relayUrl, ...(options.syncArgs ?? [])],
        config[which],
        env,
      );
    return { th, config, folder, one, two, start, deviceOne: one.deviceId, roomId };
  }

  /** Waits until the `sync` of `configDir` says nothing it read waits for the host. */
  async function confirmed(configDir: string, what = 'confirmed by the host'): Promise<void> {
    await eventually(
      async () => {
        const status = await runner.cli(['status', 'files', '--json'], configDir);
        const fields = JSON.parse(status.stdout || '{}') as {
          inSync?: boolean;
          waitingUp?: { files: number };
        };
        return fields.inSync === true && fields.waitingUp?.files === 0;
      },
      what,
      30_000,
    );
  }

  return { ...runner, tempDir, setUp, confirmed, stop };
}

/** Stops a `sync` as a service manager does (SIGTERM); it must exit 0. */
export async function stop(sync: CliRun): Promise<void> {
  sync.child.kill('SIGTERM');
  expect(await sync.exited).toBe(0);
}
