import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { once } from 'node:events';
import { resolve } from 'node:path';
import { eventually } from './wait.ts';

const defaultLauncher = resolve(import.meta.dirname, '../../bin/sync-host');

/** A running client command (`bin/sync-host login …`) with its output collected; stdin open. */
export interface CliRun {
  child: ChildProcessWithoutNullStreams;
  out: { stdout: string; stderr: string };
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  /** The pairing code `login` shows (`XXXX-XXXX`), once it shows it. */
  code(): Promise<string>;
}

/**
 * Client commands as a user runs them: each a fresh `bin/sync-host` process (or another copy's
 * launcher) with its credentials in `configDir` (SYNC_HOST_CONFIG_DIR). `killAll()` in teardown
 * ends the ones still running.
 */
export function createCliRunner(
  options: {
    launcher?: string;
    /** A program run instead of node with a launcher (the single executable). */
    executable?: string;
    env?: Record<string, string>;
  } = {},
) {
  const children: ChildProcessWithoutNullStreams[] = [];

  /** `env`: added to this command's environment (beside the runner's). */
  function spawnCli(args: string[], configDir: string, env: Record<string, string> = {}): CliRun {
    const [command, ...prefix] = options.executable
      ? [options.executable]
      : [process.execPath, options.launcher ?? defaultLauncher];
    const child = spawn(command as string, [...prefix, ...args], {
      env: {
        ...process.env,
        SYNC_HOST_CONFIG_DIR: configDir,
        LOG_LEVEL: 'warn',
        ...options.env,
        ...env,
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    children.push(child);
    const out = { stdout: '', stderr: '' };
    // Decoded as streams: a character split between two reads stays whole.
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      out.stdout += chunk;
    });
    child.stderr.on('data', (chunk: string) => {
      out.stderr += chunk;
    });
    const exited = once(child, 'exit').then(([code]) => code as number | null);
    const code = async () => {
      try {
        // Generous: a fresh process under a full test run's load takes seconds to start.
        await eventually(() => /Pairing code: +\S+/.test(out.stderr), 'the pairing code', 40_000);
      } catch (err: unknown) {
        // What the command said instead is what tells why.
        const said = `stdout: ${JSON.stringify(out.stdout.slice(-400))}, stderr: ${JSON.stringify(out.stderr.slice(-400))}, exit: ${child.exitCode}`;
        throw new Error(`${(err as Error).message} (${said})`);
      }
      return /Pairing code: +([A-Z]{4}-[A-Z]{4})/.exec(out.stderr)?.[1] ?? '';
    };
    return { child, out, exited, code };
  }

  /** Runs a command to its end (stdin closed at once). */
  async function cli(args: string[], configDir: string) {
    const run = spawnCli(args, configDir);
    run.child.stdin.end();
    const code = await run.exited;
    return { code, ...run.out };
  }

  return {
    spawnCli,
    cli,
    killAll() {
      for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}
