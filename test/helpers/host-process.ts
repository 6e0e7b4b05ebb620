import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { writeConf } from './configs.ts';
import { createWakeup, withDeadline } from './wait.ts';

const launcher = resolve(import.meta.dirname, '../../bin/sync-host');

/**
 * The spawned host factory: `bin/sync-host` as a child process (what a user runs), for tests of
 * process behaviour (signals, exit codes, output, restarts). The in-process factory is
 * `startTestHost` in ./host.ts.
 */

/** A `bin/sync-host` process whose stdout lines are collected (URLs, dev magic links). */
export interface HostProcess {
  child: ChildProcess;
  stdout: string[];
  stderr: string[];
  /** The first stdout line starting with `prefix`, waited for with a deadline. */
  line(prefix: string, deadlineMs?: number): Promise<string>;
  /** The URL printed after `label:` (relay, status, auth, admin). */
  url(label: string): Promise<string>;
  /** Waits for the next dev-mode magic-link token printed for `email` (each is returned once). */
  magicToken(email: string): Promise<string>;
  /** Sends a signal and resolves with the exit code (null when killed by the signal). */
  stop(signal: NodeJS.Signals, deadlineMs?: number): Promise<number | null>;
}

/**
 * Starts `bin/sync-host <args> --config-dir <dir>` (or another copy's launcher, with extra
 * environment variables) and waits until it printed its URLs.
 */
export async function startHostProcess(
  args: string[],
  dir: string,
  options: {
    launcher?: string;
    /** A program run instead of node with a launcher (the single executable). */
    executable?: string;
    env?: Record<string, string>;
    /** A command that runs node for it, e.g. `['prlimit', '--nofile=400']` (a descriptor limit). */
    wrapper?: string[];
    /** Options for node itself, e.g. `--cpu-prof` (not allowed in NODE_OPTIONS). */
    nodeArgs?: string[];
  } = {},
): Promise<HostProcess> {
  const [command, ...wrapperArgs] = options.wrapper ?? [options.executable ?? process.execPath];
  const program = options.executable
    ? []
    : [...(options.nodeArgs ?? []), options.launcher ?? launcher];
  const child = spawn(
    command as string,
    [
      ...wrapperArgs,
      ...(options.wrapper ? [options.executable ?? process.execPath] : []),
      ...program,
      ...args,
      '--config-dir',
      dir,
    ],
    {
      cwd: dir,
      env: { ...process.env, LOG_LEVEL: 'warn', ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const stdout: string[] = [];
  const stderr: string[] = [];
  const changed = createWakeup();
  let exited = false;
  const collect = (into: string[]) => {
    let rest = '';
    return (chunk: Buffer) => {
      const lines = (rest + chunk.toString()).split('\n');
      rest = lines.pop() ?? '';
      into.push(...lines);
      changed.wake();
    };
  };
  child.stdout?.on('data', collect(stdout));
  child.stderr?.on('data', collect(stderr));
  const exit = once(child, 'exit').then(([code]) => {
    exited = true;
    changed.wake();
    return code as number | null;
  });

  const tokensTaken = new Map<string, number>();
  const host: HostProcess = {
    child,
    stdout,
    stderr,
    async line(prefix, deadlineMs = 20_000) {
      const until = Date.now() + deadlineMs;
      for (;;) {
        const found = stdout.find((l) => l.startsWith(prefix));
        if (found !== undefined) return found;
        if (exited || Date.now() > until) {
          throw new Error(
            `no "${prefix}" line; stdout: ${stdout.join('\n')}; stderr: ${stderr.join('\n')}`,
          );
        }
        await changed.next(until - Date.now());
      }
    },
    async url(label) {
      const line = await host.line(`${label}:`);
      return line.slice(label.length + 1).trim();
    },
    async magicToken(email) {
      const prefix = `[dev] Magic link token for ${email}: `;
      const index = tokensTaken.get(email) ?? 0;
      const until = Date.now() + 10_000;
      for (;;) {
        const line = stdout.filter((l) => l.startsWith(prefix))[index];
        if (line !== undefined) {
          tokensTaken.set(email, index + 1);
          return line.slice(prefix.length).trim();
        }
        if (exited || Date.now() > until) throw new Error(`no magic link for ${email}`);
        await changed.next(until - Date.now());
      }
    },
    stop(signal, deadlineMs = 5_000) {
      if (!exited) child.kill(signal);
      return withDeadline(exit, deadlineMs, `no exit within ${deadlineMs} ms of ${signal}`);
    },
  };
  return host;
}

/** Fixed ports for a host that must come back on the same addresses after a restart. */
export interface HostPorts {
  auth: number;
  ws: number;
  status: number;
}

/**
 * A config dir for a headless host on loopback (ephemeral ports unless given), mDNS off, new
 * users on `pro`, and TLS off (plain http:// and ws://) unless `tls` says otherwise.
 */
export function hostDir(ports?: HostPorts, tls: 'off' | 'self-signed' = 'off'): string {
  const dir = mkdtempSync(join(tmpdir(), 'sync-host-'));
  writeConf(dir, 'auth.conf', {
    PORT: ports?.auth ?? 0,
    BIND: '127.0.0.1',
    MDNS: 'off',
    DEFAULT_TIER: 'pro',
    TLS: tls,
  });
  writeConf(dir, 'relay.conf', { 'ws.port': ports?.ws ?? 0, 'status.port': ports?.status ?? 0 });
  return dir;
}

/** A headless host process (auth and relay) and its URLs. */
export interface RunningHost {
  process: HostProcess;
  authUrl: string;
  relayUrl: string;
  /** The certificate's fingerprint the host printed (TLS on), else undefined. */
  fingerprint: string | undefined;
  /** Waits for the next dev-mode magic-link token printed for `email`. */
  magicToken(email: string): Promise<string>;
}

/**
 * Starts `bin/sync-host --headless` on the config dir `dir` (see `hostDir`); `nodeArgs` as for
 * `startHostProcess`.
 */
export async function startHostProgram(
  dir: string,
  options: { nodeArgs?: string[] } = {},
): Promise<RunningHost> {
  const process = await startHostProcess(['--headless'], dir, options);
  const authUrl = await process.url('auth');
  const certificate = authUrl.startsWith('https:') ? await process.line('certificate:') : '';
  return {
    process,
    authUrl,
    relayUrl: await process.url('relay'),
    fingerprint: /\(sha256 (\S+)\)$/.exec(certificate)?.[1],
    magicToken: process.magicToken,
  };
}
