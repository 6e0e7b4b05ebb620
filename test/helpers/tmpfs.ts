import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Why a small tmpfs cannot be mounted here (needs root), or undefined when it can. With
 * REQUIRE_TMPFS=1 (set by CI) that is a failure instead of a skip.
 */
export function tmpfsUnavailable(): string | undefined {
  const probe = mkdtempSync(join(tmpdir(), 'synchost-mount-'));
  let why: string | undefined;
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', probe], { stdio: 'ignore' });
    execFileSync('umount', [probe], { stdio: 'ignore' });
  } catch {
    why = 'cannot mount a tmpfs here (needs root)';
  } finally {
    rmSync(probe, { recursive: true, force: true });
  }
  if (why !== undefined && process.env.REQUIRE_TMPFS === '1')
    throw new Error(`REQUIRE_TMPFS=1 but ${why}`);
  return why;
}

/** A small tmpfs mounted for one test: filled up, freed, made read-only, unmounted. */
export interface Disk {
  dir: string;
  /** Writes a filler file until the disk is full. */
  fill(): void;
  /** Removes the filler file. */
  free(): void;
  readOnly(on: boolean): void;
  unmount(): void;
}

export function mountDisk(sizeKiB: number): Disk {
  const dir = mkdtempSync(join(tmpdir(), 'synchost-disk-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeKiB}k`, 'tmpfs', dir]);
  const filler = join(dir, 'filler');
  return {
    dir,
    fill() {
      const fd = openSync(filler, 'a');
      const chunk = Buffer.alloc(4096, 1);
      try {
        for (;;) writeSync(fd, chunk);
      } catch (err: unknown) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
      } finally {
        closeSync(fd);
      }
    },
    free() {
      rmSync(filler, { force: true });
    },
    readOnly(on) {
      execFileSync('mount', ['-o', `remount,${on ? 'ro' : 'rw'}`, dir]);
    },
    unmount() {
      execFileSync('umount', ['-l', dir]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
