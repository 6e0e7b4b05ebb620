import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { type SecureContext, TLSSocket } from 'node:tls';

/** The first byte of a TLS handshake record. */
const handshakeRecord = 0x16;
/** A connection that sends nothing for this long before its first byte is closed. */
const firstByteMs = 10_000;

/**
 * Marks a `connection` listener that must see the raw TCP socket at accept, before TLS (the
 * per-address connection cap): `serveTls` leaves it in place instead of handing it the TLS
 * socket after the first byte, so a connection that never sends a byte is counted too.
 */
export const rawConnectionListener = Symbol('raw connection listener');

const tlsServers = new WeakSet<Server>();
/** The TCP socket under each TLS socket `serveTls` made. */
const tcpUnder = new WeakMap<object, Socket>();

/** The TCP socket under `stream` when it is a TLS socket of `serveTls`, else `stream` itself. */
export function tcpSocketOf<T extends object>(stream: T): T | Socket {
  return tcpUnder.get(stream) ?? stream;
}

/** Whether `serveTls` made `server` speak TLS (nothing in plain text may be written to it). */
export function servesTls(server: Server): boolean {
  return tlsServers.has(server);
}

/** The secure context a port serves now (replaced when the certificate is renewed). */
export interface TlsContextSource {
  context(): SecureContext;
}

/**
 * What a plain HTTP request to a TLS port gets: a browser's GET (one that accepts text/html)
 * is redirected to the same address over https; anything else (a WebSocket upgrade, an API
 * call) a 400 `tls_required` saying to use TLS.
 */
function refusal(head: string): string {
  const request = /^(GET|HEAD) (\/\S*) HTTP\/1\.[01]\r\n/.exec(head);
  const hostHeader = /\r\nhost:[ \t]*([^\s]+)\r\n/i.exec(head)?.[1];
  const upgrade = /\r\nupgrade:[ \t]*websocket/i.test(head);
  const browser = /\r\naccept:[^\r\n]*text\/html/i.test(head);
  if (
    request !== null &&
    browser &&
    hostHeader !== undefined &&
    !upgrade &&
    /^[\w.:[\]-]+$/.test(hostHeader)
  ) {
    const location = `https://${hostHeader}${request[2]}`;
    return `HTTP/1.1 301 Moved Permanently\r\nLocation: ${location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`;
  }
  const body = `${JSON.stringify({
    error: {
      code: 'tls_required',
      message: 'this port speaks TLS only: use https:// (or wss:// for the relay)',
    },
  })}\n`;
  return `HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}

/**
 * Makes an HTTP server (not yet listening) serve TLS on its port: each connection's first byte
 * tells a TLS handshake, handed to the server's own connection handling wrapped in TLS, from
 * plain HTTP, answered with a refusal or a redirect and closed, never left hanging. Call it
 * after the server's other `connection` listeners are added.
 */
export function serveTls(server: Server, source: TlsContextSource): void {
  const handlers = (server.listeners('connection') as Array<(socket: Socket) => void>).filter(
    (handler) => !(rawConnectionListener in handler),
  );
  for (const handler of handlers) server.off('connection', handler);
  tlsServers.add(server);
  const waiting = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    // refused at accept by a raw listener (the connection cap)
    if (socket.destroyed) return;
    waiting.add(socket);
    const dropWaiting = () => {
      waiting.delete(socket);
      socket.destroy();
    };
    socket.setTimeout(firstByteMs, dropWaiting);
    socket.once('error', dropWaiting);
    socket.once('end', dropWaiting);
    socket.once('data', (chunk: Buffer) => {
      waiting.delete(socket);
      socket.setTimeout(0);
      socket.off('error', dropWaiting);
      socket.off('end', dropWaiting);
      socket.pause();
      if (chunk[0] !== handshakeRecord) {
        socket.on('error', () => socket.destroy());
        // Closed once the answer is written, whether or not the client closes its side.
        socket.end(refusal(chunk.toString('latin1')), () => socket.destroy());
        return;
      }
      // The TLS socket reads what is unshifted here before the rest from the network.
      socket.unshift(chunk);
      const secure = new TLSSocket(socket, { isServer: true, secureContext: source.context() });
      tcpUnder.set(secure, socket);
      for (const handler of handlers) handler.call(server, secure);
    });
  });
  const close = server.close.bind(server);
  server.close = (callback?: (err?: Error) => void) => {
    for (const socket of waiting) socket.destroy();
    waiting.clear();
    return close(callback);
  };
}
