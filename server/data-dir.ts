import { accessSync, chmodSync, constants, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { dataDirAccessError } from './data-lock.ts';
import { randomHex } from './hashing.ts';

/** Generated files of the host, all in the data folder with mode 0600. */
export interface HostSecrets {
  /** Shared secret of auth and relay (generated unless AUTH_SECRET is configured). */
  secret: string;
  /** Bearer token of the admin API and UI. */
  adminToken: string;
}

/** Reads a generated file, creating it with fresh random content (mode 0600) the first time. */
function readOrCreate(path: string): string {
  try {
    const existing = readFileSync(path, 'utf8').trim();
    if (existing !== '') return existing;
  } catch (err: unknown) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const value = randomHex(32);
  writeFileSync(path, `${value}\n`, { mode: 0o600, flag: 'w' });
  chmodSync(path, 0o600);
  return value;
}

/**
 * Creates the data folder (mode 0700) and its generated secret and admin token. A folder this
 * user cannot write is refused with a DataDirError (one line with the `chown` that fixes it).
 */
export function prepareDataDir(dataDir: string): HostSecrets {
  try {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    accessSync(dataDir, constants.W_OK);
    return {
      secret: readOrCreate(join(dataDir, 'secret')),
      adminToken: readOrCreate(join(dataDir, 'admin-token')),
    };
  } catch (err: unknown) {
    throw dataDirAccessError(dataDir, err);
  }
}
