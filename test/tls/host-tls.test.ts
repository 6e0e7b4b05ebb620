import { X509Certificate } from 'node:crypto';
import { readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { connect as connectTcp } from 'node:net';
import { join } from 'node:path';
import { connect as connectTls } from 'node:tls';
import { afterAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import {
  FingerprintMismatchError,
  peerFingerprint,
  pinnedFetch,
  pinnedWebSocket,
} from '../../client/pinning.ts';
import { loadConfig } from '../../server/config/load.ts';
import { startHost } from '../../server/host.ts';
import { createLogger } from '../../server/log.ts';
import { ensureSelfSigned, makeSelfSigned } from '../../server/tls/certificate.ts';
import { startTestHost, type TestHost } from '../helpers/host.ts';
import { tempDirMaker } from '../helpers/temp-dirs.ts';

const hosts: TestHost[] = [];
afterAll(async () => {
  for (const host of hosts) await host.close();
});

const tempDir = tempDirMaker('sync-tls-');

async function tlsHost(lines: string[] = [], now?: () => number): Promise<TestHost> {
  const host = await startTestHost({ auth: ['TLS=self-signed', ...lines], now });
  hosts.push(host);
  return host;
}

/** The certificate a TLS port shows, without trusting it. */
function shownCertificate(url: string): Promise<{ fingerprint?: string; raw: Buffer }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connectTls({ host: hostname, port: Number(port), rejectUnauthorized: false });
    socket.once('error', reject);
    socket.once('secureConnect', () => {
      const raw = socket.getPeerCertificate().raw;
      resolve({ fingerprint: peerFingerprint(socket), raw });
      socket.end();
    });
  });
}

/** What a port answers to `request` sent in clear, read until it closes the connection. */
function plainExchange(url: string, request: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connectTcp(Number(port), hostname, () => socket.write(request));
    let answer = '';
    socket.on('data', (chunk: Buffer) => {
      answer += chunk.toString();
    });
    socket.once('error', reject);
    socket.once('close', () => resolve(answer));
  });
}

describe('the all-in-one host with TLS', { timeout: 60_000 }, () => {
  it('answers HTTPS on the auth port and WSS on the relay port with one certificate, named by its fingerprint', async () => {
    const host = await tlsHost();
    const fingerprint = host.host.fingerprint ?? '';
    expect(fingerprint).toMatch(/^[\w-]{43}$/);
    expect(host.base).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(host.relayUrl).toMatch(/^wss:\/\/127\.0\.0\.1:\d+$/);
    const auth = await shownCertificate(host.base);
    const relay = await shownCertificate(host.relayUrl.replace(/^wss:/, 'https:'));
    expect(auth.fingerprint).toBe(fingerprint);
    expect(relay.raw.equals(auth.raw)).toBe(true);
    const certificate = new X509Certificate(auth.raw);
    expect(certificate.publicKey.asymmetricKeyDetails).toMatchObject({ namedCurve: 'prime256v1' });
    expect(certificate.subjectAltName).toContain('IP Address:127.0.0.1');

    const pinned = pinnedFetch(fingerprint);
    const wellKnown = await pinned(`${host.base}/.well-known/sync-host`);
    expect(await wellKnown.json()).toMatchObject({
      authUrl: host.base,
      relayUrl: host.relayUrl,
      fingerprint,
    });
    const connection = await host.admin('GET', '/connection');
    expect(connection.body).toMatchObject({ authUrl: host.base, fingerprint });

    // A device joins its room over WSS, pinned to the same fingerprint.
    const device = await host.signIn('tls@example.org');
    const project = await pinned(`${host.base}/auth/project`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${device.deviceToken}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ projectKey: 'notes', name: 'Notes' }),
    });
    const { project: record } = (await project.json()) as { project: { roomId: string } };
    const Pinned = pinnedWebSocket(fingerprint);
    const socket = new Pinned(host.relayUrl) as unknown as WebSocket;
    const joined = new Promise<string>((resolve) => {
      socket.on('message', (data) => resolve((JSON.parse(String(data)) as { type: string }).type));
    });
    await new Promise((resolve, reject) => {
      socket.once('open', resolve);
      socket.once('error', reject);
    });
    socket.send(
      JSON.stringify({
        type: 'join',
        room: record.roomId,
        device: String(device.deviceId),
        token: device.deviceToken,
      }),
    );
    expect(await joined).toBe('joined');
    socket.close();
  });

  it('refuses plain HTTP on its TLS ports at once: a redirect for a browser, 400 tls_required for the rest', async () => {
    const host = await tlsHost();
    const { host: authority } = new URL(host.base);
    const api = await plainExchange(
      host.base,
      `GET /.well-known/sync-host HTTP/1.1\r\nHost: ${authority}\r\nAccept: application/json\r\n\r\n`,
    );
    expect(api).toMatch(/^HTTP\/1\.1 400 /);
    expect(api).toContain('"code":"tls_required"');
    const browser = await plainExchange(
      host.base,
      `GET /admin/ HTTP/1.1\r\nHost: ${authority}\r\nAccept: text/html,*/*\r\n\r\n`,
    );
    expect(browser).toMatch(/^HTTP\/1\.1 301 /);
    expect(browser).toContain(`Location: https://${authority}/admin/\r\n`);
    // A ws:// client on the wss:// port: refused, never left waiting.
    const plainRelay = host.relayUrl.replace(/^wss:/, 'ws:');
    const refused = await new Promise<string>((resolve) => {
      const socket = new WebSocket(plainRelay);
      socket.once('error', (err) => resolve(err.message));
      socket.once('open', () => resolve('open'));
    });
    expect(refused).toBe('Unexpected server response: 400');
  });

  it('refuses a pinned request to a host that shows another certificate, naming both fingerprints', async () => {
    const host = await tlsHost();
    const other = 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
    const failure = await pinnedFetch(other)(`${host.base}/health`).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(FingerprintMismatchError);
    const message = (failure as Error).message;
    expect(message).toContain(other);
    expect(message).toContain(host.host.fingerprint ?? '?');
    expect(message).not.toContain('\n');
    const Pinned = pinnedWebSocket(other);
    const socket = new Pinned(host.relayUrl) as unknown as WebSocket;
    const refused = await new Promise<unknown>((resolve) => {
      socket.once('error', resolve);
      socket.once('open', () => resolve('open'));
    });
    expect(refused).toBeInstanceOf(FingerprintMismatchError);
  });

  it('keeps its key in the data folder (0600) and its fingerprint across restarts and renewals', async () => {
    const data = tempDir();
    const first = await tlsHost([`DATA_DIR=${data}`]);
    const fingerprint = first.host.fingerprint;
    const firstCert = readFileSync(join(data, 'tls-cert.pem'), 'utf8');
    expect(statSync(join(data, 'tls-key.pem')).mode & 0o777).toBe(0o600);
    await first.close();
    hosts.splice(hosts.indexOf(first), 1);
    // 350 days on, the certificate has 15 days left: made again at start, on the same key.
    const later = Date.now() + 350 * 86_400_000;
    const second = await tlsHost([`DATA_DIR=${data}`], () => later);
    expect(second.host.fingerprint).toBe(fingerprint);
    const renewed = readFileSync(join(data, 'tls-cert.pem'), 'utf8');
    expect(renewed).not.toBe(firstCert);
    expect(Date.parse(new X509Certificate(renewed).validTo)).toBeGreaterThan(later);
    expect((await shownCertificate(second.base)).fingerprint).toBe(fingerprint);
  });

  it('renews a certificate only when due or when it misses a name, and never changes the key', async () => {
    const data = tempDir();
    const now = Date.now();
    const made = await ensureSelfSigned(data, ['localhost', '127.0.0.1', '::1'], now);
    expect(made.renewed).toBe(true);
    const same = await ensureSelfSigned(data, ['localhost', '127.0.0.1', '::1'], now + 86_400_000);
    expect(same).toMatchObject({ renewed: false, cert: made.cert });
    const moved = await ensureSelfSigned(data, ['localhost', '192.0.2.77'], now);
    expect(moved.renewed).toBe(true);
    expect(moved.fingerprint).toBe(made.fingerprint);
    expect(new X509Certificate(moved.cert).subjectAltName).toContain('192.0.2.77');
    // Without its key, a new key is made: another fingerprint (devices must be paired again).
    unlinkSync(join(data, 'tls-key.pem'));
    const rekeyed = await ensureSelfSigned(data, ['localhost'], now);
    expect(rekeyed.fingerprint).not.toBe(made.fingerprint);
  });
});

describe('TLS settings', { timeout: 60_000 }, () => {
  const logger = createLogger('silent');

  it('leaves `sync-host auth` alone in plain HTTP by default', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'auth.conf'), 'PORT=0\nBIND=127.0.0.1\nMDNS=off\n');
    const host = await startHost({
      mode: 'auth',
      config: loadConfig(dir, {}),
      logger,
      print: () => {},
    });
    try {
      expect(host.urls.auth).toMatch(/^http:\/\//);
      expect(host.fingerprint).toBeUndefined();
      expect((await fetch(`${host.urls.auth}/health`)).status).toBe(200);
    } finally {
      await host.close();
    }
  });

  it('serves the files of TLS=files, and a relay of its own with tls.cert and tls.key', async () => {
    const dir = tempDir();
    const key = await ensureSelfSigned(tempDir(), ['localhost'], Date.now());
    const pair = await makeSelfSigned(key.key, ['localhost', '127.0.0.1'], Date.now());
    writeFileSync(join(dir, 'cert.pem'), pair.cert);
    writeFileSync(join(dir, 'key.pem'), pair.key);
    writeFileSync(
      join(dir, 'auth.conf'),
      'PORT=0\nBIND=127.0.0.1\nMDNS=off\nTLS=files\nTLS_CERT=cert.pem\nTLS_KEY=key.pem\n',
    );
    writeFileSync(join(dir, 'relay.conf'), 'ws.port=0\nstatus.port=0\n');
    const host = await startHost({
      mode: 'auth',
      config: loadConfig(dir, {}),
      logger,
      print: () => {},
    });
    try {
      expect(host.fingerprint).toBe(pair.fingerprint);
      expect((await shownCertificate(host.urls.auth ?? '')).fingerprint).toBe(pair.fingerprint);
    } finally {
      await host.close();
    }
    writeFileSync(
      join(dir, 'relay.conf'),
      'ws.port=0\nstatus.port=0\nauth.secret=a-tls-test-secret-of-at-least-32-bytes\ntls.cert=cert.pem\ntls.key=key.pem\n',
    );
    const relay = await startHost({
      mode: 'relay',
      config: loadConfig(dir, {}),
      logger,
      print: () => {},
    });
    try {
      expect(relay.urls.relay).toMatch(/^wss:\/\//);
      const shown = await shownCertificate((relay.urls.relay ?? '').replace(/^wss:/, 'https:'));
      expect(shown.fingerprint).toBe(pair.fingerprint);
    } finally {
      await relay.close();
    }
  });

  it('warns at start when AUTH_BASE_URL is http:// while the auth port speaks TLS', async () => {
    const logs: string[] = [];
    const host = await startTestHost({
      auth: ['TLS=self-signed', 'AUTH_BASE_URL=http://sync.example.org:8445'],
      logs,
    });
    hosts.push(host);
    const warnings = logs.filter((line) => line.includes('AUTH_BASE_URL is http://'));
    expect(warnings).toHaveLength(1);
    const plain = await startTestHost({
      auth: ['AUTH_BASE_URL=http://sync.example.org:8445'],
      logs,
    });
    hosts.push(plain);
    expect(logs.filter((line) => line.includes('AUTH_BASE_URL is http://'))).toHaveLength(1);
  });

  it('refuses TLS=files without its files, naming the key', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'auth.conf'), 'TLS=files\nTLS_KEY=key.pem\n');
    expect(() => loadConfig(dir, {})).toThrow(/TLS_CERT is required when TLS=files/);
    writeFileSync(join(dir, 'auth.conf'), 'TLS=on\n');
    expect(() => loadConfig(dir, {})).toThrow(/TLS: must be off, self-signed or files/);
  });

  it('names the key of a certificate file that cannot be read', async () => {
    const dir = tempDir();
    writeFileSync(
      join(dir, 'auth.conf'),
      'PORT=0\nBIND=127.0.0.1\nMDNS=off\nTLS=files\nTLS_CERT=missing.pem\nTLS_KEY=key.pem\n',
    );
    const start = startHost({ mode: 'auth', config: loadConfig(dir, {}), logger, print: () => {} });
    await expect(start).rejects.toThrow(
      /^auth\.conf: TLS_CERT: cannot read .*missing\.pem \(ENOENT\)$/,
    );
  });
});
