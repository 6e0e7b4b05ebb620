import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { clientAddressOf } from './client-address.ts';

/**
 * The limit on open connections per client address that have not joined a room
 * (`relay.maxUnjoinedPerAddress`): counted from the TCP accept (the upgrade request may still be
 * arriving) until the first join or the close. Beyond it a new connection from that address is
 * answered `429` at once and closed, so that half-open upgrades from one address cannot take the
 * descriptors the relay needs for everyone else. The address is the socket's peer address; for
 * a connection from a trusted reverse proxy (`TRUST_PROXY`) it is the forwarded client address,
 * counted once the upgrade request (and its X-Forwarded-For) has arrived, so that clients behind
 * one proxy do not share one count. What a proxy holds open before that is bounded by the
 * relay's 10 s request timeout.
 */
export interface UnjoinedLimit {
  /** A TCP connection was accepted: counted, or refused (429) when its address is at the limit. */
  admit(socket: Socket): boolean;
  /**
   * The upgrade request of a connection from a trusted proxy arrived: counted by the forwarded
   * address, or refused (429) at the limit. Connections not from a proxy pass (counted at accept).
   */
  admitRequest(req: IncomingMessage, socket: Duplex): boolean;
  /** The connection joined a room: it no longer counts. */
  joined(stream: Duplex): void;
  /** Connections refused since the start. */
  readonly refused: number;
}

/** How long a refused connection may take to close after its 429 before it is cut. */
const refusedLingerMs = 1_000;

const refusal = (limit: number) => {
  const body = `too many connections from this address waiting to join (relay.maxUnjoinedPerAddress = ${limit}); retry later\n`;
  return (
    'HTTP/1.1 429 Too Many Requests\r\n' +
    'Content-Type: text/plain; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    'Retry-After: 10\r\n' +
    'Connection: close\r\n\r\n' +
    body
  );
};

export function createUnjoinedLimit(
  limit: number,
  trustProxy: readonly string[] = [],
): UnjoinedLimit & {
  /** Whether a socket was refused (its request, if it arrives, is not served). */
  isRefused(socket: Duplex): boolean;
} {
  const counts = new Map<string, number>();
  const counted = new WeakMap<Duplex, string>();
  const refusedSockets = new WeakSet<Duplex>();
  const response = refusal(limit);
  const { isProxy, addressOf } = clientAddressOf(trustProxy);
  let refused = 0;

  /** Counts `stream` for `address`, or answers 429 and closes it when the address is full. */
  function count(stream: Duplex, address: string): boolean {
    const open = counts.get(address) ?? 0;
    if (open >= limit) {
      refused++;
      refusedSockets.add(stream);
      // the answer, then the close once the client closes its side (a client that reads
      // nothing is cut after a second: it must not keep the descriptor)
      stream.end(response);
      setTimeout(() => stream.destroy(), refusedLingerMs).unref();
      stream.on('error', () => {});
      return false;
    }
    counts.set(address, open + 1);
    counted.set(stream, address);
    stream.on('close', releaseOnClose);
    return true;
  }

  /** One listener for every counted socket (`this`), removed at join: nothing kept per joined one. */
  function releaseOnClose(this: Duplex): void {
    release(this);
  }

  function release(stream: Duplex): void {
    const address = counted.get(stream);
    if (address === undefined) return;
    counted.delete(stream);
    stream.off('close', releaseOnClose);
    const left = (counts.get(address) ?? 1) - 1;
    if (left <= 0) counts.delete(address);
    else counts.set(address, left);
  }

  return {
    get refused() {
      return refused;
    },

    admit(socket) {
      const peer = socket.remoteAddress ?? '';
      return isProxy(peer) || count(socket, peer);
    },

    admitRequest(req, socket) {
      const peer = req.socket.remoteAddress ?? '';
      if (!isProxy(peer)) return true;
      const forwarded = req.headers['x-forwarded-for'];
      return count(
        socket,
        addressOf(peer, Array.isArray(forwarded) ? forwarded.join(',') : forwarded),
      );
    },

    joined(stream) {
      release(stream);
    },

    isRefused(socket) {
      return refusedSockets.has(socket);
    },
  };
}
