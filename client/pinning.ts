import { createHash, X509Certificate } from 'node:crypto';
import { Agent, type AgentOptions, request } from 'node:https';
import { isIP } from 'node:net';
import type { Duplex } from 'node:stream';
import { type ConnectionOptions, connect, type TLSSocket } from 'node:tls';
import { WebSocket } from 'ws';
import { fingerprintOf, sameFingerprint, shortFingerprint } from '../protocol/fingerprint.ts';
import { SyncError } from './errors.ts';
import type { WebSocketConstructor } from './relay-connection.ts';

/**
 * Pinning a host's certificate in Node: connections go on only when the server shows a
 * certificate whose public key has the pinned fingerprint (SHA-256 of its SubjectPublicKeyInfo),
 * whoever signed it; nothing is sent before that is checked. Browsers cannot pin: there the
 * browser's own trust decides.
 */

/** A host showed a certificate other than the pinned one. */
export class FingerprintMismatchError extends SyncError {
  constructor(
    readonly url: string,
    readonly expected: string,
    readonly seen: string | undefined,
  ) {
    super(
      'fingerprint_mismatch',
      `the host at ${url} shows certificate ${seen === undefined ? 'none' : `${shortFingerprint(seen)} (sha256 ${seen})`}, not the pinned ${shortFingerprint(expected)} (sha256 ${expected}); if the host was reinstalled, check the certificate line it prints and sign in again with sync-host login --auth ${url} --fingerprint <new>`,
    );
    this.name = 'FingerprintMismatchError';
  }
}

/** The fingerprint of the certificate a TLS socket's peer showed; undefined when it showed none. */
export function peerFingerprint(socket: TLSSocket): string | undefined {
  const raw = socket.getPeerCertificate(false)?.raw;
  if (raw === undefined) return undefined;
  const spki = new X509Certificate(raw).publicKey.export({ type: 'spki', format: 'der' });
  return fingerprintOf(createHash('sha256').update(spki).digest());
}

/** What a TLS handshake with `url`'s host and port shows: its fingerprint, and whether a CA vouches for it. */
export function probeCertificate(
  url: string,
  timeoutMs = 10_000,
): Promise<{ fingerprint: string | undefined; authorized: boolean }> {
  const { hostname, port } = new URL(url);
  const host = hostname.replace(/^\[|\]$/g, '');
  return new Promise((resolve, reject) => {
    const socket = connect({
      host,
      port: Number(port) || 443,
      servername: isIP(host) ? undefined : host,
      rejectUnauthorized: false,
      timeout: timeoutMs,
    });
    socket.once('timeout', () =>
      socket.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })),
    );
    socket.once('error', reject);
    socket.once('secureConnect', () => {
      const result = { fingerprint: peerFingerprint(socket), authorized: socket.authorized };
      socket.end();
      resolve(result);
    });
  });
}

/** An https Agent whose connections are handed over only once the server's key has `fingerprint`. */
export function pinnedAgent(fingerprint: string, options: AgentOptions = {}): Agent {
  const agent = new Agent({ ...options, maxCachedSessions: 0 });
  const create = (
    connectOptions: ConnectionOptions & { href?: string },
    done: (err: Error | null, socket?: Duplex) => void,
  ): undefined => {
    const socket = connect({
      ...connectOptions,
      rejectUnauthorized: false,
      // Names do not matter: the key does (a LAN address may change, the key stays).
      checkServerIdentity: () => undefined,
    });
    let settled = false;
    const settle = (err: Error | null) => {
      if (settled) return;
      settled = true;
      if (err === null) done(null, socket);
      else {
        socket.destroy();
        done(err);
      }
    };
    socket.once('error', settle);
    socket.once('secureConnect', () => {
      socket.off('error', settle);
      const seen = peerFingerprint(socket);
      const where = `https://${connectOptions.host ?? ''}:${connectOptions.port ?? ''}`;
      if (seen !== undefined && sameFingerprint(seen, fingerprint)) settle(null);
      else settle(new FingerprintMismatchError(where, fingerprint, seen));
    });
    return undefined;
  };
  (agent as unknown as { createConnection: typeof create }).createConnection = create;
  return agent;
}

/** A `fetch` for https:// URLs over a pinned agent (what the auth client needs: method, headers, a text body). */
export function pinnedFetch(fingerprint: string): typeof fetch {
  const agent = pinnedAgent(fingerprint);
  return async (input, init) => {
    // The Request class reads every kind of body (text, form fields, bytes) and the headers.
    const asked = new Request(input, init);
    const url = new URL(asked.url);
    if (url.protocol !== 'https:') {
      throw new SyncError(
        'not_https',
        `${url.origin} is not https://: a pinned host is reached over TLS only`,
      );
    }
    const headers = Object.fromEntries(asked.headers.entries());
    const body = asked.body === null ? undefined : Buffer.from(await asked.arrayBuffer());
    if (body !== undefined) headers['content-length'] = String(body.byteLength);
    return new Promise<Response>((resolve, reject) => {
      const req = request(
        url,
        { method: asked.method, headers, agent, signal: init?.signal ?? undefined },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.once('error', reject);
          res.once('end', () => {
            const status = res.statusCode ?? 500;
            const responseHeaders = new Headers();
            for (const [name, value] of Object.entries(res.headers)) {
              if (typeof value === 'string') responseHeaders.set(name, value);
              else if (Array.isArray(value)) for (const v of value) responseHeaders.append(name, v);
            }
            const empty = status === 204 || status === 304 || (status >= 100 && status < 200);
            resolve(
              new Response(empty ? null : Buffer.concat(chunks), {
                status,
                statusText: res.statusMessage ?? '',
                headers: responseHeaders,
              }),
            );
          });
        },
      );
      req.once('error', (err: Error) =>
        reject(
          err instanceof SyncError
            ? err
            : Object.assign(new TypeError('fetch failed'), { cause: err }),
        ),
      );
      req.end(body);
    });
  };
}

/** The `ws` WebSocket class over a pinned agent; a ws:// URL is refused (never in clear). */
export function pinnedWebSocket(fingerprint: string): WebSocketConstructor {
  const agent = pinnedAgent(fingerprint);
  return class PinnedWebSocket extends WebSocket {
    constructor(url: string) {
      if (!url.startsWith('wss:')) {
        throw new SyncError(
          'not_https',
          `${url} is not wss://: a pinned host is reached over TLS only`,
        );
      }
      super(url, { agent });
    }
  };
}

/** What the client library's options take to pin a host: `new SyncClient(settings, { pin: pinTo })`. */
export function pinTo(fingerprint: string): {
  fetch: typeof fetch;
  WebSocket: WebSocketConstructor;
} {
  return { fetch: pinnedFetch(fingerprint), WebSocket: pinnedWebSocket(fingerprint) };
}
