import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const launcher = resolve(import.meta.dirname, '../../bin/sync-host');

/** A `bin/sync-host` process whose stdout lines are collected (URLs, dev magic links). */
export interface HostProcess {
  child: ChildProcess;
  stdout: string[];
  stderr: string[];
  /** The first stdout line starting with `prefix`, waited for with a deadline. */
  line(prefix: string, deadlineMs?: number): Promise<string>;
  /** The URL printed after `label:` (relay, status, auth, admin). */
  url(label: string): Promise<string>;
  /** Sends a signal and resolves with the exit code (null when killed by the signal). */
  stop(signal: NodeJS.Signals, deadlineMs?: number): Promise<number | null>;
}

/** Writes a conf file of `KEY=VALUE` lines. */
export function writeConf(
  dir: string,
  name: 'auth.conf' | 'relay.conf',
  values: Record<string, string | number>,
) {
  writeFileSync(
    join(dir, name),
    `${Object.entries(values)
      .map(([key, value]) => `${key}=${value}`)
      .join('\n')}\n`,
  );
}

/** Starts `bin/sync-host <args> --config-dir <dir>` and waits until it printed its URLs. */
export async function startHostProcess(args: string[], dir: string): Promise<HostProcess> {
  const child = spawn(process.execPath, [launcher, ...args, '--config-dir', dir], {
    cwd: dir,
    env: { ...process.env, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const stdout: string[] = [];
  const stderr: string[] = [];
  const waiters = new Set<() => void>();
  let exited = false;
  const collect = (into: string[]) => {
    let rest = '';
    return (chunk: Buffer) => {
      const lines = (rest + chunk.toString()).split('\n');
      rest = lines.pop() ?? '';
      into.push(...lines);
      for (const wake of waiters) wake();
    };
  };
  child.stdout?.on('data', collect(stdout));
  child.stderr?.on('data', collect(stderr));
  const exit = once(child, 'exit').then(([code]) => {
    exited = true;
    for (const wake of waiters) wake();
    return code as number | null;
  });

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
        await new Promise<void>((wake) => {
          const timer = setTimeout(wake, until - Date.now());
          waiters.add(() => {
            clearTimeout(timer);
            wake();
          });
        });
      }
    },
    async url(label) {
      const line = await host.line(`${label}:`);
      return line.slice(label.length + 1).trim();
    },
    async stop(signal, deadlineMs = 5_000) {
      if (!exited) child.kill(signal);
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`no exit within ${deadlineMs} ms of ${signal}`)),
          deadlineMs,
        );
      });
      try {
        return await Promise.race([exit, deadline]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
  return host;
}
