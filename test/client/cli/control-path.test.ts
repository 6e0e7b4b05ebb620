import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { controlSocketFolders, controlSocketPath } from '../../../client/cli/control-path.ts';

/**
 * The control socket's folder when the credentials folder's path is too long for a socket: under
 * the shared temporary folder, named from a secret of the credentials folder, so that another
 * local user cannot make it first (their folder there would stop this user's `sync`).
 */

const made: string[] = [];
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function longConfigDir(): string {
  const base = mkdtempSync(join(tmpdir(), 'control-path-'));
  made.push(base);
  const deep = join(base, 'a'.repeat(60), 'b'.repeat(60));
  mkdirSync(deep, { recursive: true, mode: 0o700 });
  return deep;
}

describe.skipIf(process.platform === 'win32')('control socket path', () => {
  it('falls back to a folder under tmp that only this credentials folder can name', () => {
    const config = longConfigDir();
    const tmp = mkdtempSync(join(tmpdir(), 'control-tmp-'));
    made.push(tmp);
    const uid = process.getuid?.() ?? 0;
    // The name the folder had before, from the path alone: anyone could make it first.
    const guessable = `sync-host-${uid}-${createHash('sha256').update(config).digest('hex').slice(0, 12)}`;
    const socket = controlSocketPath(config, 'http://127.0.0.1:8445', 'notes', tmp);
    expect(dirname(dirname(socket))).toBe(tmp);
    expect(dirname(socket)).not.toBe(join(tmp, guessable));
    expect(dirname(socket).startsWith(join(tmp, `sync-host-${uid}-`))).toBe(true);
    // The same every time, for the sync and for the commands that look for it.
    expect(controlSocketPath(config, 'http://127.0.0.1:8445', 'notes', tmp)).toBe(socket);
    expect(controlSocketFolders(config, tmp)).toContain(dirname(socket));
    expect(statSync(join(config, 'run.key')).mode & 0o077).toBe(0);
    // Another credentials folder names another folder.
    const other = controlSocketPath(longConfigDir(), 'http://127.0.0.1:8445', 'notes', tmp);
    expect(dirname(other)).not.toBe(dirname(socket));
  });

  it('keeps a short credentials folder to itself, with no secret made', () => {
    const config = mkdtempSync(join(tmpdir(), 'cp-'));
    made.push(config);
    const socket = controlSocketPath(config, 'http://127.0.0.1:8445', 'notes');
    expect(socket).toBe(join(config, 'run', `${socket.split('/').at(-1)}`));
    expect(controlSocketFolders(config)).toEqual([join(config, 'run')]);
  });
});
