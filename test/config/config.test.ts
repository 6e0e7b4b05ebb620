import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildAuthConfig } from '../../server/config/auth-config.ts';
import { ConfigError, parseConf } from '../../server/config/conf-file.ts';
import { ConfigProblems } from '../../server/config/keys.ts';
import { loadConfig } from '../../server/config/load.ts';

const auth = (text: string) =>
  buildAuthConfig(parseConf(text, 'auth.conf'), 'auth.conf', '/srv/sync');

function problemOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err: unknown) {
    if (err instanceof ConfigError || err instanceof ConfigProblems) return err.message;
    throw err;
  }
  throw new Error('expected a configuration error');
}

describe('conf file syntax', () => {
  it('reads KEY=VALUE lines with comments, blank lines, whitespace and quotes', () => {
    const entries = parseConf(
      [
        '# a comment',
        '',
        '  PORT = 9000  ',
        'AUTH_SECRET="s3cr=t # not a comment"',
        "SMTP_FROM='Sync <s@x.example>'",
        'DB_NAME=sync # inline comment',
        'EMPTY=',
      ].join('\n'),
      'auth.conf',
    );
    expect(entries).toEqual([
      { key: 'PORT', value: '9000', line: 3 },
      { key: 'AUTH_SECRET', value: 's3cr=t # not a comment', line: 4 },
      { key: 'SMTP_FROM', value: 'Sync <s@x.example>', line: 5 },
      { key: 'DB_NAME', value: 'sync', line: 6 },
      { key: 'EMPTY', value: '', line: 7 },
    ]);
  });

  it('names the file and line of a line that is not KEY=VALUE or has an unterminated quote', () => {
    expect(problemOf(() => parseConf('PORT=1\njust words\n', 'auth.conf'))).toBe(
      'auth.conf:2: expected KEY=VALUE, got "just words"',
    );
    expect(problemOf(() => parseConf('\n\nAUTH_SECRET="open\n', 'auth.conf'))).toBe(
      'auth.conf:3: AUTH_SECRET: unterminated " quote',
    );
  });
});

describe('auth.conf', () => {
  it('gives the embedded defaults with no file at all', () => {
    const c = auth('');
    expect(c).toMatchObject({
      db: { driver: 'sqlite', path: '/srv/sync/data/auth.db' },
      port: 8445,
      bind: '0.0.0.0',
      dataDir: '/srv/sync/data',
      defaultTier: 'free',
      tokenSignature: 'hmac-sha256',
      mdns: true,
      signup: 'open',
      allowedEmails: [],
      authSecret: undefined,
      smtp: undefined,
    });
  });

  it('accepts the upper-case and the dotted spelling of the same keys', () => {
    const upper = auth(
      'DB_HOST=db\nDB_USER=u\nDB_PASS=p\nDB_NAME=n\nAUTH_SECRET=s-0123456789abcdef0123456789abcdef\nAUTH_BASE_URL=https://sync.example/\nSMTP_HOST=mail\nSMTP_USER=m\nSMTP_PASS=mp',
    );
    const dotted = auth(
      'db.host=db\ndb.user=u\ndb.password=p\ndb.name=n\nauth.secret=s-0123456789abcdef0123456789abcdef\nauth.baseUrl=https://sync.example/\nsmtp.host=mail\nsmtp.user=m\nsmtp.password=mp',
    );
    expect(dotted).toEqual(upper);
    expect(upper.db).toEqual({
      driver: 'postgres',
      host: 'db',
      port: 5432,
      user: 'u',
      password: 'p',
      database: 'n',
    });
    expect(upper.smtp).toEqual({
      host: 'mail',
      port: 587,
      user: 'm',
      password: 'mp',
      from: 'sync-host <no-reply@mail>',
    });
    expect(upper.authBaseUrl).toBe('https://sync.example');
  });

  it('selects MySQL with DB_DRIVER and its default port, and parses the extra keys', () => {
    const c = auth(
      'db.driver=mariadb\nDB_HOST=h\nDB_USER=u\nDB_PASS=\nDB_NAME=n\nAUTH_SECRET=s-0123456789abcdef0123456789abcdef\nAUTH_BASE_URL=http://h:8445\nSIGNUP=allowlist\nALLOWED_EMAILS= A@X.example , *@Team.example\nDEFAULT_TIER=pro\nMDNS=off\nTOKEN_SIGNATURE=djb2\nRELAY_URL=wss://relay.example',
    );
    expect(c.db).toEqual({
      driver: 'mysql',
      host: 'h',
      port: 3306,
      user: 'u',
      password: '',
      database: 'n',
    });
    expect(c).toMatchObject({
      signup: 'allowlist',
      allowedEmails: ['a@x.example', '*@team.example'],
      defaultTier: 'pro',
      mdns: false,
      tokenSignature: 'djb2',
      relayUrl: 'wss://relay.example',
    });
  });

  it('warns about unknown keys instead of failing', () => {
    expect(auth('PORT=1\nFANCY_FEATURE=yes').unknownKeys).toEqual(['auth.conf:2: FANCY_FEATURE']);
  });

  it('names file, line and key of a bad number', () => {
    expect(problemOf(() => auth('# c\nPORT=eighty'))).toMatch(
      /^auth\.conf:2: PORT: must be a port number/,
    );
    expect(problemOf(() => auth('smtp.port=70000'))).toMatch(
      /^auth\.conf:1: smtp\.port: must be a port number between 1 and 65535/,
    );
  });

  it('refuses a blank port instead of reading it as 0 (an ephemeral port nobody could find)', () => {
    expect(problemOf(() => auth('PORT='))).toMatch(/^auth\.conf:1: PORT: must be a port number/);
    expect(problemOf(() => auth('DB_PORT=  '))).toMatch(/^auth\.conf:1: DB_PORT: must be a port/);
    expect(auth('PORT=0').port).toBe(0);
  });

  it('requires DB_USER, DB_PASS, DB_NAME, AUTH_SECRET and AUTH_BASE_URL with DB_HOST, each on its own line', () => {
    const message = problemOf(() => auth('DB_HOST=db.example'));
    const lines = message.split('\n');
    expect(lines).toHaveLength(5);
    for (const key of ['DB_USER', 'DB_PASS', 'DB_NAME', 'AUTH_SECRET', 'AUTH_BASE_URL']) {
      expect(lines.some((l) => l.startsWith('auth.conf: ') && l.includes(key))).toBe(true);
    }
  });

  it('refuses contradictory and malformed values with an exact message', () => {
    expect(problemOf(() => auth('DB_DRIVER=postgres'))).toBe(
      "auth.conf:1: DB_DRIVER: postgres needs DB_HOST (the database server's host name)",
    );
    expect(problemOf(() => auth('SIGNUP=maybe'))).toBe(
      'auth.conf:1: SIGNUP: must be open or allowlist',
    );
    expect(problemOf(() => auth('AUTH_BASE_URL=ftp://x'))).toBe(
      'auth.conf:1: AUTH_BASE_URL: must be an http:// or https:// URL',
    );
    expect(problemOf(() => auth('DEFAULT_TIER=gold'))).toBe(
      'auth.conf:1: DEFAULT_TIER: must be free, personal, pro or team',
    );
  });

  it('lets environment variables named like the keys override the file', () => {
    const c = buildAuthConfig(parseConf('PORT=1000', 'auth.conf'), 'auth.conf', '/srv', {
      PORT: '2000',
      LOG_LEVEL: 'debug',
    });
    expect(c.port).toBe(2000);
    expect(c.logLevel).toBe('debug');
  });
});

describe('relay.conf and loading', () => {
  const dir = () => mkdtempSync(join(tmpdir(), 'synchost-conf-'));

  it('reads relay.conf dotted keys and their upper-case forms with the contract defaults', () => {
    const d = dir();
    writeFileSync(
      join(d, 'relay.conf'),
      'auth.secret = "abc-0123456789abcdef0123456789abcdef"\nRATE_PER_SECOND=50\nroom.maxDevices=8\n',
    );
    const { relay, files } = loadConfig(d, {});
    expect(files).toEqual({ auth: false, relay: true });
    expect(relay).toMatchObject({
      secret: 'abc-0123456789abcdef0123456789abcdef',
      sqlitePath: join(d, 'data', 'relay.db'),
      wsPort: 8443,
      statusPort: 8444,
      ratePerSecond: 50,
      rateBurst: 400,
      roomMaxDevices: 8,
      messageMaxBytes: 1_048_576,
      bufferSeconds: 60,
      tokenSignature: 'hmac-sha256',
    });
  });

  it('names relay.conf, line and key of a bad value', () => {
    const d = dir();
    writeFileSync(join(d, 'relay.conf'), 'ws.port=8443\nrate.burst=-3\n');
    expect(problemOf(() => loadConfig(d, {}))).toMatch(
      /^relay\.conf:2: rate\.burst: must be positive/,
    );
  });

  it('reports the problems of auth.conf and relay.conf together, a syntax error among them', () => {
    const d = dir();
    writeFileSync(join(d, 'auth.conf'), 'PORT=lots\nSIGNUP=closed\n');
    writeFileSync(join(d, 'relay.conf'), 'ws.port=8443\njust words\n');
    expect(problemOf(() => loadConfig(d, {})).split('\n')).toEqual([
      'relay.conf:2: expected KEY=VALUE, got "just words"',
      'auth.conf:1: PORT: must be a port number',
      'auth.conf:2: SIGNUP: must be open or allowlist',
    ]);
    writeFileSync(join(d, 'relay.conf'), 'rate.burst=-3\n');
    expect(problemOf(() => loadConfig(d, {})).split('\n')).toEqual([
      'auth.conf:1: PORT: must be a port number',
      'auth.conf:2: SIGNUP: must be open or allowlist',
      'relay.conf:1: rate.burst: must be positive (a message count)',
    ]);
  });

  it('reads the cluster keys of relay.conf and CLUSTER_NATS of auth.conf, and names a bad URL', () => {
    const d = dir();
    writeFileSync(
      join(d, 'relay.conf'),
      'cluster.nats = nats://10.0.0.1:4222, tls://nats.example.org:4222,10.0.0.3\ncluster.node=relay-a\n',
    );
    writeFileSync(join(d, 'auth.conf'), 'CLUSTER_NATS=nats://127.0.0.1:4222\n');
    const { relay, auth: authConf } = loadConfig(d, {});
    expect(relay.clusterNats).toEqual([
      'nats://10.0.0.1:4222',
      'tls://nats.example.org:4222',
      '10.0.0.3',
    ]);
    expect(relay.clusterNode).toBe('relay-a');
    expect(authConf.clusterNats).toEqual(['nats://127.0.0.1:4222']);
    const defaults = loadConfig(dir(), {}).relay;
    expect([defaults.clusterNats, defaults.clusterNode]).toEqual([[], undefined]);
    writeFileSync(join(d, 'relay.conf'), 'cluster.nats=http://x:1/path\n');
    expect(problemOf(() => loadConfig(d, {}))).toMatch(
      /^relay\.conf:1: cluster\.nats: must be NATS server URLs/,
    );
  });

  it('reads store.url (STORE_URL) of relay.conf, and names a URL that is not postgres:// without echoing it', () => {
    const d = dir();
    writeFileSync(join(d, 'relay.conf'), 'STORE_URL = postgres://sync:pw@10.0.0.9:5432/store\n');
    expect(loadConfig(d, {}).relay.storeUrl).toBe('postgres://sync:pw@10.0.0.9:5432/store');
    expect(loadConfig(dir(), {}).relay.storeUrl).toBeUndefined();
    writeFileSync(join(d, 'relay.conf'), 'store.url=mysql://sync:hidden-pw@10.0.0.9/store\n');
    const problem = problemOf(() => loadConfig(d, {}));
    expect(problem).toMatch(/^relay\.conf:1: store\.url: must be a postgres:\/\/ URL/);
    expect(problem).not.toContain('hidden-pw');
  });

  it('reads the memory and connection bounds of relay.conf, and refuses bounds that cannot hold a message', () => {
    const defaults = loadConfig(dir(), {}).relay;
    expect(defaults).toMatchObject({
      maxQueuedBytes: 4 * 1024 * 1024,
      maxMemoryBytes: 512 * 1024 * 1024,
      maxUnjoinedPerAddress: 32,
    });
    const d = dir();
    writeFileSync(
      join(d, 'relay.conf'),
      'relay.maxQueuedBytes=2097152\nRELAY_MAX_MEMORY_BYTES=67108864\nrelay.maxUnjoinedPerAddress=4\n',
    );
    expect(loadConfig(d, {}).relay).toMatchObject({
      maxQueuedBytes: 2_097_152,
      maxMemoryBytes: 67_108_864,
      maxUnjoinedPerAddress: 4,
    });
    writeFileSync(join(d, 'relay.conf'), 'relay.maxQueuedBytes=1000\nrelay.maxMemoryBytes=999\n');
    expect(problemOf(() => loadConfig(d, {})).split('\n')).toEqual([
      'relay.conf:1: relay.maxQueuedBytes: must be at least message.maxBytes (1048576): a receiver must be able to hold one message',
      'relay.conf:2: relay.maxMemoryBytes: must be at least relay.maxQueuedBytes (1000)',
    ]);
  });

  it('reads trust.proxy of relay.conf (empty by default) and names a bad entry', () => {
    expect(loadConfig(dir(), {}).relay.trustProxy).toEqual([]);
    const d = dir();
    writeFileSync(join(d, 'relay.conf'), 'trust.proxy = 127.0.0.1, 10.0.0.0/8\n');
    expect(loadConfig(d, {}).relay.trustProxy).toEqual(['127.0.0.1', '10.0.0.0/8']);
    writeFileSync(join(d, 'relay.conf'), 'trust.proxy=10.0.0.0/33\n');
    expect(problemOf(() => loadConfig(d, {}))).toMatch(
      /^relay\.conf:1: trust\.proxy: must list IP addresses or CIDRs/,
    );
  });

  it('reports an unreadable file by name', () => {
    const d = dir();
    mkdirSync(join(d, 'auth.conf'));
    expect(problemOf(() => loadConfig(d, {}))).toBe('auth.conf: cannot read the file (EISDIR)');
  });
});
