import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, lstatSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { SyncError } from '../errors.ts';

/**
 * Where the control socket of a running `sync` is (see control-socket.ts), and the checks that
 * keep it this user's own.
 */

/** The longest socket path (bytes, without the final NUL): macOS allows 104, Linux 108. */
export const maxSocketPathBytes = 103;

function hashOf(...parts: string[]): string {
  return createHash('sha256').update(parts.join('\n')).digest('hex');
}

/**
 * A secret of the credentials folder `absolute` (made once, `run.key`, readable by this user
 * only): the name of its socket folder under the shared temporary folder is a hash of it, which
 * another local user cannot compute, so cannot make first (a folder of theirs there would stop
 * this user's `sync`).
 */
function folderSecret(absolute: string): string {
  const file = join(absolute, 'run.key');
  const read = () => readFileSync(file, 'utf8').trim();
  try {
    return read();
  } catch (err: unknown) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  mkdirSync(absolute, { recursive: true, mode: 0o700 });
  try {
    writeFileSync(file, randomBytes(16).toString('hex'), { mode: 0o600, flag: 'wx' });
  } catch (err: unknown) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  return read();
}

/** The socket folder of `absolute` under the shared temporary folder `tmp`. */
function tmpFolder(absolute: string, tmp: string): string {
  const uid = process.getuid?.() ?? 0;
  return join(tmp, `sync-host-${uid}-${hashOf(folderSecret(absolute), absolute).slice(0, 12)}`);
}

/**
 * The control socket of the sync of `projectKey` on `authUrl` for the credentials in
 * `configDir`: `<configDir>/run/<hash>.sock`, or, when that path is too long for a socket,
 * `<tmpdir>/sync-host-<uid>-<hash of a secret of configDir>/<hash>.sock`. A named pipe on
 * Windows.
 */
export function controlSocketPath(
  configDir: string,
  authUrl: string,
  projectKey: string,
  tmp: string = tmpdir(),
): string {
  const name = hashOf(authUrl, projectKey).slice(0, 16);
  const absolute = resolve(configDir);
  if (process.platform === 'win32') {
    return `\\\\.\\pipe\\sync-host-${hashOf(absolute, authUrl, projectKey).slice(0, 32)}`;
  }
  const inConfig = join(absolute, 'run', `${name}.sock`);
  if (Buffer.byteLength(inConfig) <= maxSocketPathBytes) return inConfig;
  const inTmp = join(tmpFolder(absolute, tmp), `${name}.sock`);
  if (Buffer.byteLength(inTmp) <= maxSocketPathBytes) return inTmp;
  throw new SyncError(
    'path_too_long',
    `no control socket path fits in ${maxSocketPathBytes} bytes (${inTmp}); set TMPDIR to a shorter folder`,
  );
}

/** The folders where the control sockets of `configDir`'s syncs can be (none on Windows). */
export function controlSocketFolders(configDir: string, tmp: string = tmpdir()): string[] {
  if (process.platform === 'win32') return [];
  const absolute = resolve(configDir);
  const inConfig = join(absolute, 'run');
  // A folder whose sockets all fit there never made a secret: nothing under tmp to look at.
  try {
    lstatSync(join(absolute, 'run.key'));
  } catch {
    return [inConfig];
  }
  return [inConfig, tmpFolder(absolute, tmp)];
}

/**
 * Checks (and with `create`, makes) the socket's folder: a directory, not a link, owned by this
 * user and closed to others (0700), so that no one else can plant or read the socket. Returns
 * false when it does not exist (and `create` is off).
 */
export function socketFolderReady(path: string, create: boolean): boolean {
  if (process.platform === 'win32') return true;
  const folder = dirname(path);
  if (create) mkdirSync(folder, { recursive: true, mode: 0o700 });
  let stat: ReturnType<typeof lstatSync>;
  try {
    stat = lstatSync(folder);
  } catch (err: unknown) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
  const uid = process.getuid?.();
  if (!stat.isDirectory() || (uid !== undefined && stat.uid !== uid)) {
    throw new SyncError(
      'unsafe_socket_folder',
      `${folder} is not a folder of this user; remove it (it holds sync-host's control sockets)`,
    );
  }
  if ((stat.mode & 0o077) !== 0) {
    if (!create) {
      throw new SyncError('unsafe_socket_folder', `${folder} is open to other users (chmod 700)`);
    }
    chmodSync(folder, 0o700);
  }
  return true;
}
