import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { SyncError } from '../errors.ts';

/** What `login` keeps for one auth service. */
const credentialSchema = z.object({
  email: z.string(),
  userId: z.number(),
  deviceId: z.number(),
  deviceName: z.string(),
  deviceToken: z.string(),
  savedAt: z.string(),
  /** The host certificate's fingerprint pinned at login (https:// hosts with a self-signed certificate). */
  fingerprint: z.string().optional(),
});

const fileSchema = z.object({
  version: z.literal(1),
  /** Keyed by auth URL (no trailing slash). */
  hosts: z.record(z.string(), credentialSchema),
});

export type Credential = z.infer<typeof credentialSchema>;

/**
 * `$SYNC_HOST_CONFIG_DIR`, else the user's config folder: `%APPDATA%\sync-host` on Windows,
 * `$XDG_CONFIG_HOME/sync-host` or `~/.config/sync-host` elsewhere.
 */
export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SYNC_HOST_CONFIG_DIR) return env.SYNC_HOST_CONFIG_DIR;
  if (process.platform === 'win32' && env.APPDATA) return join(env.APPDATA, 'sync-host');
  return join(env.XDG_CONFIG_HOME || join(homedir(), '.config'), 'sync-host');
}

/** The credentials file (`credentials.json`, mode 0600) of a config folder. */
export class CredentialStore {
  readonly path: string;

  constructor(readonly dir: string) {
    this.path = join(dir, 'credentials.json');
  }

  private read(): z.infer<typeof fileSchema> {
    if (!existsSync(this.path)) return { version: 1, hosts: {} };
    let value: unknown;
    try {
      value = JSON.parse(readFileSync(this.path, 'utf8'));
    } catch (err: unknown) {
      if (!(err instanceof SyntaxError)) throw err;
      value = undefined;
    }
    const parsed = fileSchema.safeParse(value);
    if (!parsed.success) {
      throw new SyncError(
        'bad_credentials',
        `${this.path} is not a sync-host credentials file; remove it and sign in again`,
      );
    }
    return parsed.data;
  }

  /** Auth URLs with stored credentials. */
  authUrls(): string[] {
    return Object.keys(this.read().hosts);
  }

  get(authUrl: string): Credential | undefined {
    return this.read().hosts[authUrl];
  }

  /** Stores (replaces) the credential of an auth service; the file is written with mode 0600. */
  save(authUrl: string, credential: Credential): void {
    const file = this.read();
    file.hosts[authUrl] = credential;
    this.write(file);
  }

  /** Forgets the credential of an auth service (logout). */
  remove(authUrl: string): void {
    const file = this.read();
    delete file.hosts[authUrl];
    this.write(file);
  }

  private write(file: z.infer<typeof fileSchema>): void {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const temp = `${this.path}.${process.pid}.tmp`;
    writeFileSync(temp, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600 });
    chmodSync(temp, 0o600);
    renameSync(temp, this.path);
  }
}
