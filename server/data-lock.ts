import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from './config/conf-file.ts';

/**
 * A data folder this process cannot use: already used by another running host, or not writable
 * by this user. A configuration mistake: exit code 2 and one line, and systemd does not restart.
 */
export class DataDirError extends ConfigError {
  constructor(dataDir: string, problem: string) {
    super(dataDir, undefined, 'DATA_DIR', problem);
    this.name = 'DataDirError';
  }
}

/** Who holds a lock: its process id and the boot it was taken in (a pid is reused after a reboot). */
interface LockOwner {
  pid: number;
  bootId: string | undefined;
}

function currentBootId(): string | undefined {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return undefined;
  }
}

function readOwner(path: string): LockOwner | undefined {
  try {
    const [pid, bootId] = readFileSync(path, 'utf8').split('\n');
    const number = Number(pid);
    return Number.isSafeInteger(number) && number > 0
      ? { pid: number, bootId: bootId || undefined }
      : undefined;
  } catch (err: unknown) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** Whether the process that wrote a lock still runs (in this boot). */
function isRunning(owner: LockOwner, bootId: string | undefined): boolean {
  if (owner.bootId !== undefined && bootId !== undefined && owner.bootId !== bootId) return false;
  try {
    process.kill(owner.pid, 0);
    return true;
  } catch (err: unknown) {
    // EPERM: it runs, as another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The `chown` line that gives a folder to the user this process runs as. */
export function chownHint(dataDir: string): string {
  let user: string;
  try {
    user = userInfo().username;
  } catch {
    user = String(process.getuid?.() ?? '');
  }
  return `sudo chown -R ${user} ${dataDir}`;
}

/** An error of the file system on the data folder, as the one line a user reads. */
export function dataDirAccessError(dataDir: string, err: unknown): unknown {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  if (code === 'EACCES' || code === 'EPERM') {
    return new DataDirError(
      dataDir,
      `this user cannot write the data folder (${code}); give it to this user: ${chownHint(dataDir)}`,
    );
  }
  if (code === 'EROFS')
    return new DataDirError(dataDir, 'the data folder is on a read-only file system');
  return err;
}

/** A held lock of the data folder; `release()` removes it (at shutdown). */
export interface DataDirLock {
  release(): void;
}

/**
 * Takes `<dataDir>/<name>.lock` for this process: refused with a DataDirError while another
 * running process holds it; a lock left by a process that is gone (a crash, a power cut) is
 * taken over. Each service locks its own name, so an auth process and a relay process may share
 * a data folder, but two hosts may not.
 */
export function lockDataDir(dataDir: string, names: readonly string[]): DataDirLock {
  const held: string[] = [];
  const release = () => {
    for (const path of held.splice(0)) {
      try {
        if (readOwner(path)?.pid === process.pid) unlinkSync(path);
      } catch {
        // Already gone: nothing to release.
      }
    }
  };
  try {
    for (const name of names) held.push(takeLock(dataDir, join(dataDir, `${name}.lock`)));
  } catch (err: unknown) {
    release();
    throw err;
  }
  return { release };
}

function takeLock(dataDir: string, path: string): string {
  const bootId = currentBootId();
  // Two tries: the second after removing a lock whose owner is gone.
  for (let attempt = 0; ; attempt++) {
    let fd: number;
    try {
      fd = openSync(path, 'wx', 0o600);
    } catch (err: unknown) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw dataDirAccessError(dataDir, err);
      const owner = readOwner(path);
      if (owner !== undefined && isRunning(owner, bootId)) {
        throw new DataDirError(
          dataDir,
          `the data folder is in use by another running sync-host (pid ${owner.pid}); stop it first, or give this host its own DATA_DIR`,
        );
      }
      if (attempt > 0) throw new DataDirError(dataDir, `cannot take over the stale lock ${path}`);
      try {
        unlinkSync(path);
      } catch (unlinkErr: unknown) {
        if ((unlinkErr as NodeJS.ErrnoException).code !== 'ENOENT') {
          throw dataDirAccessError(dataDir, unlinkErr);
        }
      }
      continue;
    }
    try {
      writeSync(fd, `${process.pid}\n${bootId ?? ''}\n`);
    } finally {
      closeSync(fd);
    }
    return path;
  }
}
