import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildAuthConfig } from '../../server/config/auth-config.ts';
import { ConfigError, parseConf } from '../../server/config/conf-file.ts';
import { effectiveConfig } from '../../server/config/effective.ts';
import { ConfigProblems } from '../../server/config/keys.ts';
import { buildRelayConfig } from '../../server/config/relay-config.ts';

const dir = mkdtempSync(join(tmpdir(), 'sync-host-nats-access-'));
const seed = join(dir, 'nats.nk');
writeFileSync(seed, 'SUAIBDPBAUTWCWBKIO6XHQNINK5FWJW4OHLXC3HQ2KFE4PV5BJ5X3HYY\n');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const relay = (text: string) =>
  buildRelayConfig(parseConf(text, 'relay.conf'), 'relay.conf', '/srv', '/srv/data');
const auth = (text: string) => buildAuthConfig(parseConf(text, 'auth.conf'), 'auth.conf', '/srv');

function problemOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err: unknown) {
    if (err instanceof ConfigError || err instanceof ConfigProblems) return err.message;
    throw err;
  }
  throw new Error('expected a configuration error');
}

describe('NATS credentials and CA in auth.conf and relay.conf', () => {
  it('takes user and password, a token, an nkey seed file or a CA file in both files', () => {
    const r = relay(
      `cluster.nats=tls://nats1:4222\ncluster.user=relay\ncluster.password=pw\ncluster.caFile=${seed}`,
    );
    expect(r).toMatchObject({ clusterUser: 'relay', clusterPassword: 'pw', clusterCaFile: seed });
    expect(auth(`CLUSTER_NATS=nats1:4222\nCLUSTER_TOKEN=tok`).clusterToken).toBe('tok');
    expect(auth(`CLUSTER_NKEY_FILE=${seed}`).clusterNkeyFile).toBe(seed);
  });

  it('refuses a password without a user, two ways to sign in, and a file it cannot read', () => {
    expect(problemOf(() => relay('cluster.password=pw'))).toBe(
      'relay.conf:1: cluster.password: is set without cluster.user (the user it belongs to)',
    );
    expect(problemOf(() => auth('CLUSTER_USER=relay\nCLUSTER_PASSWORD=pw\nCLUSTER_TOKEN=t'))).toBe(
      'auth.conf:3: CLUSTER_TOKEN: set only one way to sign in to NATS, not CLUSTER_USER and CLUSTER_TOKEN',
    );
    expect(problemOf(() => relay(`cluster.credsFile=${join(dir, 'missing.creds')}`))).toBe(
      'relay.conf:1: cluster.credsFile: must name a file this process can read',
    );
    expect(problemOf(() => relay('cluster.caFile=ca.pem'))).toContain('must be an absolute path');
  });

  it('never shows the password or the token in config check', () => {
    const configDir = mkdtempSync(join(dir, 'conf-'));
    writeFileSync(
      join(configDir, 'relay.conf'),
      'auth.secret=a-test-secret-of-at-least-32-bytes-long\ncluster.nats=nats://n:4222\ncluster.token=the-nats-token\n',
    );
    writeFileSync(join(configDir, 'auth.conf'), 'CLUSTER_USER=a\nCLUSTER_PASSWORD=the-nats-pw\n');
    const shown = JSON.stringify(effectiveConfig(configDir, {}));
    expect(shown).not.toContain('the-nats-token');
    expect(shown).not.toContain('the-nats-pw');
  });
});
