import { statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type AuthConfig, buildAuthConfig } from './auth-config.ts';
import { ConfigError, readConfFile } from './conf-file.ts';
import { ConfigProblems } from './keys.ts';
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
  // Every problem of both files at once: fixing one file must not reveal new ones in the other.
  const problems: ConfigError[] = [];
  const authEntries = collectProblems(problems, () =>
    readConfFile(join(dir, 'auth.conf'), 'auth.conf'),
  );
  const relayEntries = collectProblems(problems, () =>
    readConfFile(join(dir, 'relay.conf'), 'relay.conf'),
  );
  const auth = collectProblems(problems, () =>
    buildAuthConfig(authEntries ?? [], 'auth.conf', dir, env),
  );
  // Without a valid auth.conf, relay.conf is still checked (its data folder then the default).
  const dataDir = auth?.dataDir ?? resolve(dir, 'data');
  const relay = collectProblems(problems, () =>
    buildRelayConfig(relayEntries ?? [], 'relay.conf', dir, dataDir, env),
  );
  if (problems.length === 1 && problems[0] !== undefined) throw problems[0];
  if (problems.length > 0 || auth === undefined || relay === undefined) {
    throw new ConfigProblems(problems);
  }
  return {
    configDir: dir,
    auth,
    relay,
    files: { auth: authEntries !== undefined, relay: relayEntries !== undefined },
  };
}

/** `fn()`, or undefined with its configuration mistakes added to `problems`. */
function collectProblems<T>(problems: ConfigError[], fn: () => T): T | undefined {
  try {
    return fn();
  } catch (err: unknown) {
    if (err instanceof ConfigError) problems.push(err);
    else if (err instanceof ConfigProblems) problems.push(...err.problems);
    else throw err;
    return undefined;
  }
}
