/**
 * The floor of the folder section of `npm run bench:sync` (bench/sync-folders.ts): one
 * `rsync -a` push of the folder to an rsync daemon on loopback. No watcher, no index, no host in
 * between: what copying the bytes from one folder to another through a socket costs here.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../test/helpers/ports.ts';
import { eventually } from '../test/helpers/wait.ts';

export function rsyncBinary(): string | undefined {
  return spawnSync('rsync', ['--version']).status === 0 ? 'rsync' : undefined;
}

/** An rsync daemon on 127.0.0.1 serving `dir` as the writable module `bench`. */
export class RsyncDaemon {
  private constructor(
    private readonly child: ChildProcess,
    readonly port: number,
  ) {}

  static async start(root: string, dir: string): Promise<RsyncDaemon> {
    const port = await freePort();
    const config = join(root, 'rsyncd.conf');
    writeFileSync(
      config,
      [
        'use chroot = false',
        `pid file = ${join(root, 'rsyncd.pid')}`,
        '[bench]',
        `path = ${dir}`,
        'read only = false',
        `uid = ${process.getuid?.() ?? 0}`,
        `gid = ${process.getgid?.() ?? 0}`,
      ].join('\n'),
    );
    const child = spawn(
      'rsync',
      ['--daemon', '--no-detach', `--port=${port}`, '--address=127.0.0.1', `--config=${config}`],
      { stdio: 'ignore' },
    );
    const daemon = new RsyncDaemon(child, port);
    await eventually(
      () => spawnSync('rsync', [`rsync://127.0.0.1:${port}/`]).status === 0,
      'rsync daemon up',
      10_000,
    );
    return daemon;
  }

  /** Pushes `from` (its content) to the module; the bytes rsync counted both ways. */
  push(from: string): { sent: number; received: number } {
    const out = execFileSync(
      'rsync',
      ['-a', '--stats', `${from}/`, `rsync://127.0.0.1:${this.port}/bench/`],
      { encoding: 'utf8' },
    );
    const count = (label: string) =>
      Number(new RegExp(`${label}: ([\\d,]+)`).exec(out)?.[1]?.replaceAll(',', '') ?? Number.NaN);
    return { sent: count('Total bytes sent'), received: count('Total bytes received') };
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = once(this.child, 'exit');
    this.child.kill('SIGTERM');
    await exited;
  }
}
