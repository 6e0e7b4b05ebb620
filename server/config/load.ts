import { statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type AuthConfig, buildAuthConfig } from './auth-config.ts';
import { ConfigError, readConfFile } from './conf-file.ts';
import { buildRelayConfig, type RelayConfig } from './relay-config.ts';

export interface LoadedConfig {
  /** Folder the conf files were read from (cwd or --config-dir). */
  configDir: string;
  auth: AuthConfig;
  relay: RelayConfig;
  /** Whether each file existed. */
  files: { auth: boolean; relay: boolean };
}

/**
 * Reads auth.conf and relay.conf from `configDir` (either may be absent) and validates both.
 * Throws ConfigError / ConfigProblems for user mistakes (a `configDir` that is not an existing
 * folder among them); the caller prints them and exits 2.
 */
export function loadConfig(configDir: string, env: NodeJS.ProcessEnv = process.env): LoadedConfig {
  const dir = resolve(configDir);
  // A mistyped folder must not silently become a brand-new install.
  const kind = statSync(dir, { throwIfNoEntry: false });
  if (kind === undefined || !kind.isDirectory()) {
    const problem = kind === undefined ? 'does not exist' : 'is not a folder';
    throw new ConfigError('--config-dir', undefined, undefined, `${dir} ${problem}`);
  }
  const authEntries = readConfFile(join(dir, 'auth.conf'), 'auth.conf');
  const relayEntries = readConfFile(join(dir, 'relay.conf'), 'relay.conf');
  const auth = buildAuthConfig(authEntries ?? [], 'auth.conf', dir, env);
  const relay = buildRelayConfig(relayEntries ?? [], 'relay.conf', dir, auth.dataDir, env);
  return {
    configDir: dir,
    auth,
    relay,
    files: { auth: authEntries !== undefined, relay: relayEntries !== undefined },
  };
}
