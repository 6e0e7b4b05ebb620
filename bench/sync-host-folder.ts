/**
 * sync-host's side of the folder section of `npm run bench:sync` (bench/sync-folders.ts): a
 * headless host process (`bin/sync-host --headless`, the defaults of a new install, on loopback)
 * and per round two `sync-host sync` processes, each logged in as its own device of one user, on
 * a new project with two empty folders. `BENCH_PROFILE=<dir>` runs the host and the two sync
 * processes with `--cpu-prof` into that folder. The host keeps up to 16 GiB per user
 * (`store.userMaxBytes`, 1 GiB by default), so that the 100,000-file count fits.
 *
 * The processes run the compiled build, as an installed package does: the bench builds it
 * first (`npm run build`), since the launcher falls back to the TypeScript sources through tsx
 * when a source file is newer than the build, and those hold about 35 MiB more per process.
 * `BENCH_SOURCES=1` skips the build (the launcher then picks as it always does).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { appendFileSync, mkdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { buildDist } from '../build/bundle.ts';
import { signIn } from '../test/client/host.ts';
import { registerProject } from '../test/helpers/host.ts';
import { hostDir, type RunningHost, startHostProgram } from '../test/helpers/host-process.ts';
import { eventually } from '../test/helpers/wait.ts';

const launcher = resolve(import.meta.dirname, '../bin/sync-host');

function profileArgs(name: string): string[] {
  const dir = process.env.BENCH_PROFILE;
  return dir ? ['--cpu-prof', `--cpu-prof-dir=${dir}`, `--cpu-prof-name=${name}.cpuprofile`] : [];
}

/** One `sync-host sync` process. */
export interface SyncProcess {
  child: ChildProcess;
  output: string[];
  stop(): Promise<void>;
}

function startSync(args: string[], configDir: string, profileName: string): SyncProcess {
  const child = spawn(process.execPath, [...profileArgs(profileName), launcher, ...args], {
    env: { ...process.env, SYNC_HOST_CONFIG_DIR: configDir, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  child.stdout?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  return {
    child,
    output,
    async stop() {
      if (child.exitCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** The host, its relay port, and what starts a pair of syncing devices. */
export class SyncHostBench {
  private constructor(
    readonly host: RunningHost,
    readonly relayPort: number,
    private readonly dir: string,
    /** The device tokens of A and B, signed in once (the host limits sign-in links per email). */
    private readonly tokens: { a: string; b: string },
  ) {}

  static async start(): Promise<SyncHostBench> {
    if (process.env.BENCH_SOURCES !== '1') await buildDist();
    const dir = hostDir();
    // One user's projects may keep 16 GiB on this host (1 GiB by default): a folder of 100,000
    // mixed files keeps more than 1 GiB of documents and chunks, and would stop at store_full.
    appendFileSync(join(dir, 'relay.conf'), `store.userMaxBytes=${16 * 1024 ** 3}\n`);
    const host = await startHostProgram(dir, { nodeArgs: profileArgs('host') });
    try {
      const tokens = {
        a: (await signIn(host, 'bench@example.org', 'a')).deviceToken,
        b: (await signIn(host, 'bench@example.org', 'b')).deviceToken,
      };
      return new SyncHostBench(host, Number(new URL(host.relayUrl).port), dir, tokens);
    } catch (err: unknown) {
      await host.process.stop('SIGTERM', 15_000);
      throw err;
    }
  }

  /** Device `side` logged in with a config folder of its own. */
  private login(side: 'a' | 'b', configDir: string): void {
    mkdirSync(configDir, { recursive: true });
    const login = spawnSync(
      process.execPath,
      [launcher, 'login', '--auth', this.host.authUrl, '--token', this.tokens[side]],
      { env: { ...process.env, SYNC_HOST_CONFIG_DIR: configDir }, encoding: 'utf8' },
    );
    if (login.status !== 0) throw new Error(`login: ${login.stderr}`);
  }

  /**
   * Two sync processes on project `project` syncing `dirA` and `dirB` (config folders under
   * `root`), both watching and joined.
   */
  async pair(root: string, project: string, dirA: string, dirB: string): Promise<SyncProcess[]> {
    const runs: SyncProcess[] = [];
    try {
      for (const [side, dir] of [
        ['a', dirA],
        ['b', dirB],
      ] as const) {
        const configDir = join(root, `config-${side}`);
        this.login(side, configDir);
        if (side === 'a') await this.registerProject(project);
        const run = startSync(
          ['sync', project, dir, '--relay', this.host.relayUrl],
          configDir,
          `sync-${project}-${side}`,
        );
        runs.push(run);
        await eventually(
          () => run.output.join('').includes('watching'),
          `sync ${side} watching`,
          60_000,
        );
      }
      // Joined: each holds its connection to the relay.
      await eventually(
        () => runs.every((run) => this.connected(run)),
        'both sync processes on the relay',
        30_000,
      );
      return runs;
    } catch (err: unknown) {
      for (const run of runs) await run.stop();
      throw err;
    }
  }

  /**
   * Registers `project` for device A; asked again once when the connection fetch kept from an
   * earlier request was closed by the host meanwhile (its keep-alive ends while a login runs).
   */
  private async registerProject(project: string): Promise<void> {
    try {
      await registerProject(this.host.authUrl, this.tokens.a, project);
    } catch (err: unknown) {
      if (!(err instanceof TypeError)) throw err;
      await registerProject(this.host.authUrl, this.tokens.a, project);
    }
  }

  private connected(run: SyncProcess): boolean {
    const out = spawnSync(
      'ss',
      ['-tnpH', 'state', 'established', `( dport = :${this.relayPort} )`],
      {
        encoding: 'utf8',
      },
    ).stdout;
    return out.includes(`pid=${run.child.pid},`);
  }

  async close(): Promise<void> {
    await this.host.process.stop('SIGTERM', 15_000);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
