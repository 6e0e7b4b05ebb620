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
  /** The file that keeps the admin token, and whether this start created it. */
  adminTokenFile: { path: string; created: boolean };
}

/** Reads a generated file, creating it with fresh random content (mode 0600) the first time. */
function readOrCreate(path: string): { value: string; created: boolean } {
  try {
    const existing = readFileSync(path, 'utf8').trim();
    if (existing !== '') return { value: existing, created: false };
  } catch (err: unknown) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const value = randomHex(32);
  writeFileSync(path, `${value}\n`, { mode: 0o600, flag: 'w' });
  chmodSync(path, 0o600);
  return { value, created: true };
}

/**
 * Creates the data folder (mode 0700) and its generated secret and admin token. A folder this
 * user cannot write is refused with a DataDirError (one line with the `chown` that fixes it).
 */
export function prepareDataDir(dataDir: string): HostSecrets {
  try {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    accessSync(dataDir, constants.W_OK);
    const adminTokenPath = join(dataDir, 'admin-token');
    const admin = readOrCreate(adminTokenPath);
    return {
      secret: readOrCreate(join(dataDir, 'secret')).value,
      adminToken: admin.value,
      adminTokenFile: { path: adminTokenPath, created: admin.created },
    };
  } catch (err: unknown) {
    throw dataDirAccessError(dataDir, err);
  }
}
