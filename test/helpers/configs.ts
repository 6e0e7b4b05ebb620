import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AuthConfig } from '../../server/config/auth-config.ts';
import { type LoadedConfig, loadConfig } from '../../server/config/load.ts';
import type { RelayConfig } from '../../server/config/relay-config.ts';

/** Values of a conf file, written as `KEY=VALUE` lines. */
export type ConfValues = Record<string, string | number>;

/** Writes a conf file of `KEY=VALUE` lines into `dir`. */
export function writeConf(dir: string, name: 'auth.conf' | 'relay.conf', values: ConfValues) {
  writeFileSync(
    join(dir, name),
    `${Object.entries(values)
      .map(([key, value]) => `${key}=${value}`)
      .join('\n')}\n`,
  );
}

/**
 * Writes the relay.conf of a relay process on loopback: `secret`, relay.db in `dir`, ephemeral
 * ports, and `extra` keys besides.
 */
export function writeLoopbackRelayConf(dir: string, secret: string, extra: ConfValues = {}) {
  writeConf(dir, 'relay.conf', {
    'auth.secret': secret,
    'sqlite.path': './relay.db',
    'ws.port': 0,
    'status.port': 0,
    bind: '127.0.0.1',
    ...extra,
  });
}

/**
 * Writes auth.conf and relay.conf into `dir` and reads them back with the real loader (no
 * environment), so that tests and the bench run on the configuration a user's files produce,
 * defaults included.
 */
export function loadTestConfig(
  dir: string,
  values: { auth?: ConfValues; relay?: ConfValues },
): LoadedConfig {
  writeConf(dir, 'auth.conf', values.auth ?? {});
  writeConf(dir, 'relay.conf', values.relay ?? {});
  return loadConfig(dir, {});
}

/** The relay secret of test relays. */
export const testSecret = 'relay-test-secret-0123456789abcdef';

/**
 * The config of a test (or bench) relay: loopback, ephemeral ports, relay.db in `dir`, silent
 * logs, `testSecret`, every other key at its default; `overrides` replace fields of the result.
 */
export function testRelayConfig(dir: string, overrides: Partial<RelayConfig> = {}): RelayConfig {
  const { relay } = loadTestConfig(dir, {
    relay: {
      'auth.secret': testSecret,
      'sqlite.path': join(dir, 'relay.db'),
      'ws.port': 0,
      'status.port': 0,
      bind: '127.0.0.1',
      'log.level': 'silent',
    },
  });
  return { ...relay, ...overrides };
}

/**
 * The config of a test (or bench) auth service: loopback, an ephemeral port, mDNS off, data in
 * `dir`, and the auth.conf keys of `conf`.
 */
export function testAuthConfig(dir: string, conf: ConfValues = {}): AuthConfig {
  return loadTestConfig(dir, {
    auth: { PORT: 0, BIND: '127.0.0.1', MDNS: 'off', DATA_DIR: dir, ...conf },
  }).auth;
}
