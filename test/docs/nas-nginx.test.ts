import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdminPairing } from '../../server/admin/types.ts';
import { registerProject, startTestHost, type TestHost } from '../helpers/host.ts';
import {
  type NginxProcess,
  nginxConf,
  nginxSkipReason,
  nginxTest,
  selfSignedCertificate,
  startNginx,
} from '../helpers/nginx.ts';
import { freePort } from '../helpers/ports.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { nasBlock } from './nas-doc.ts';

const serverName = 'sync.example.com';
/** The address the test's requests come from: not nginx's 127.0.0.1, so not a trusted proxy. */
const clientAddress = '127.0.0.5';

/** `text` with `from` replaced by `to`, which must occur exactly `times` times. */
function substitute(text: string, from: string, to: string, times = 1): string {
  expect(text.split(from).length - 1, `"${from}" in the doc's nginx config`).toBe(times);
  return text.split(from).join(to);
}

/** The doc's auth.conf block as key → value (comments and blank lines left out). */
function docAuthConf(): Map<string, string> {
  const entries = nasBlock('ini', 'TRUST_PROXY')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const at = line.indexOf('=');
      return [line.slice(0, at).trim(), line.slice(at + 1).trim()] as const;
    });
  return new Map(entries);
}

const skip = nginxSkipReason();

describe.skipIf(skip !== undefined)(
  skip === undefined
    ? "docs/nas.md's nginx in front of the host"
    : `docs/nas.md's nginx in front of the host (skipped: ${skip})`,
  () => {
    const prefix = mkdtempSync(join(tmpdir(), 'sync-host-nginx-'));
    let th: TestHost;
    let nginx: NginxProcess | undefined;
    let httpPort: number;
    let httpsPort: number;
    let ca: Buffer;
    let checked: { status: number | null; output: string };

    beforeAll(async () => {
      const conf = docAuthConf();
      // The doc binds the host to loopback, trusts nginx on this machine, and advertises the
      // relay at nginx's /relay. (Its public URLs are left out of the test host's config: the
      // test reaches the host's own ports on loopback, not by that name.)
      expect(conf.get('BIND')).toBe('127.0.0.1');
      // nginx speaks TLS; the host behind it plain HTTP.
      expect(conf.get('TLS')).toBe('off');
      expect(conf.get('TRUST_PROXY')).toBe('127.0.0.1');
      expect(conf.get('AUTH_BASE_URL')).toBe(`https://${serverName}`);
      expect(conf.get('RELAY_URL')).toBe(`wss://${serverName}/relay`);
      th = await startTestHost({
        ui: false,
        auth: ['TRUST_PROXY', 'DEFAULT_TIER', 'TLS'].map((key) => `${key}=${conf.get(key) ?? ''}`),
      });
      const { cert, key } = selfSignedCertificate(prefix, serverName);
      ca = readFileSync(cert);
      httpPort = await freePort();
      httpsPort = await freePort();
      const authPort = new URL(th.base).port;
      const relayPort = new URL(th.relayUrl).port;
      let http = nasBlock('nginx', 'server_name');
      http = substitute(http, 'listen 80;', `listen 127.0.0.1:${httpPort};`);
      http = substitute(http, 'listen 443 ssl http2;', `listen 127.0.0.1:${httpsPort} ssl http2;`);
      http = substitute(http, `/etc/letsencrypt/live/${serverName}/fullchain.pem`, cert);
      http = substitute(http, `/etc/letsencrypt/live/${serverName}/privkey.pem`, key);
      http = substitute(http, 'http://127.0.0.1:8443', `http://127.0.0.1:${relayPort}`);
      http = substitute(http, 'http://127.0.0.1:8445', `http://127.0.0.1:${authPort}`, 2);
      checked = nginxTest(prefix, nginxConf(prefix, http));
      if (checked.status === 0) nginx = await startNginx(prefix, httpsPort);
    }, 60_000);

    afterAll(async () => {
      await nginx?.stop();
      await th?.close();
      rmSync(prefix, { recursive: true, force: true });
    });

    /** A request to nginx's TLS port as a client on the Internet makes it (Host, SNI, our CA). */
    function viaNginx(
      path: string,
      options: { method?: string; headers?: Record<string, string>; body?: unknown } = {},
    ): Promise<{ status: number; headers: IncomingHttpHeaders; body: string }> {
      const body = options.body === undefined ? undefined : JSON.stringify(options.body);
      return new Promise((done, fail) => {
        const req = httpsRequest(
          {
            host: '127.0.0.1',
            port: httpsPort,
            path,
            method: options.method ?? 'GET',
            servername: serverName,
            ca,
            localAddress: clientAddress,
            headers: {
              Host: serverName,
              ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
              ...options.headers,
            },
          },
          (res) => {
            let text = '';
            res.on('data', (chunk: Buffer) => {
              text += chunk.toString();
            });
            res.on('end', () =>
              done({ status: res.statusCode ?? 0, headers: res.headers, body: text }),
            );
          },
        );
        req.on('error', fail);
        req.end(body);
      });
    }

    it('passes nginx -t (Debian 12 nginx 1.22, listen 443 ssl http2) without warnings', () => {
      expect(checked.output).toContain('syntax is ok');
      expect(checked.output).toContain('test is successful');
      expect(checked.output).not.toMatch(/\[(warn|emerg|alert|crit)\]/);
      expect(checked.status).toBe(0);
    });

    it('answers /health and the discovery document over TLS, and redirects port 80 to https', async () => {
      const health = await viaNginx('/health');
      expect(health.status).toBe(200);
      expect(JSON.parse(health.body)).toMatchObject({ status: 'ok' });
      const discovery = await viaNginx('/.well-known/sync-host');
      expect(JSON.parse(discovery.body)).toMatchObject({ authUrl: th.base, relayUrl: th.relayUrl });
      const redirect = await new Promise<{ status?: number; location?: string }>((done, fail) => {
        httpRequest(
          { host: '127.0.0.1', port: httpPort, path: '/health', headers: { Host: serverName } },
          (res) => {
            res.resume();
            done({ status: res.statusCode, location: res.headers.location });
          },
        )
          .on('error', fail)
          .end();
      });
      expect(redirect).toEqual({ status: 301, location: `https://${serverName}/health` });
    });

    it('with TRUST_PROXY the host sees the client address nginx forwards, never one the client made up', async () => {
      const plain = await viaNginx('/auth/pair', {
        method: 'POST',
        body: { deviceName: 'through-nginx', platform: 'linux' },
      });
      expect(plain.status).toBe(201);
      const spoofed = await viaNginx('/auth/pair', {
        method: 'POST',
        headers: { 'X-Forwarded-For': '203.0.113.7' },
        body: { deviceName: 'spoofing', platform: 'linux' },
      });
      expect(spoofed.status).toBe(201);
      const { pairings } = (await th.admin('GET', '/pairings')).body as {
        pairings: AdminPairing[];
      };
      expect(pairings.map((p) => [p.deviceName, p.clientAddress])).toEqual([
        ['through-nginx', clientAddress],
        ['spoofing', clientAddress],
      ]);
    });

    it('keeps the admin API to the LAN: a request from elsewhere is refused by nginx', async () => {
      const res = await viaNginx('/admin/api/pairings', {
        headers: { Authorization: `Bearer ${th.host.adminToken}` },
      });
      expect(res.status).toBe(403);
      expect(res.body).not.toContain('pairings');
    });

    it('carries the relay WebSocket on wss://…/relay: two devices join and exchange a message', async () => {
      const { deviceId: first, deviceToken: firstToken } = await th.signIn('nas@example.com');
      const { roomId } = await registerProject(th.base, firstToken, 'notes');
      const second = await th.signIn('nas@example.com', 'phone');
      const ws = {
        ca,
        servername: serverName,
        headers: { Host: serverName },
        localAddress: clientAddress,
      };
      const url = `wss://127.0.0.1:${httpsPort}/relay`;
      const a = new RelayClient(url, { ws });
      const b = new RelayClient(url, { ws });
      a.opened.catch(() => {});
      b.opened.catch(() => {});
      try {
        expect(await a.join(roomId, first, firstToken)).toMatchObject({ type: 'joined' });
        expect(await b.join(roomId, second.deviceId, second.deviceToken)).toMatchObject({
          type: 'joined',
        });
        a.send({ to: second.deviceId, payload: { text: 'through nginx' } });
        expect(await b.message()).toMatchObject({
          from: first,
          payload: { text: 'through nginx' },
        });
      } finally {
        a.terminate();
        b.terminate();
      }
    });
  },
);
