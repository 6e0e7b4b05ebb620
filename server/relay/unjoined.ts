import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { createAddressCap, endRefused } from '../address-cap.ts';
import type { ConnectionBudget } from '../connection-budget.ts';

/**
 * The limit on open connections per client address that have not joined a room
 * (`relay.maxUnjoinedPerAddress`): counted from the TCP accept (the upgrade request may still be
 * arriving) until the first join or the close. Beyond it a new connection from that address is
 * answered `429` at once and closed, so that half-open upgrades from one address cannot take the
 * descriptors the relay needs for everyone else. The address is the socket's peer address (an
 * IPv6 address by its /64); for a connection from a trusted reverse proxy (`TRUST_PROXY`) it is
 * the forwarded client address, counted once the upgrade request (and its X-Forwarded-For) has
 * arrived, so that clients behind one proxy do not share one count. What a proxy holds open
 * before that is bounded by the relay's 10 s request timeout. The counting is server/address-cap.ts's.
 * Each counted connection is also in the process's budget of untrusted connections
 * (server/connection-budget.ts): when it is full, the oldest of the address holding the most is
 * closed to make room.
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
  /** Connections closed to make room in the budget of untrusted connections, since the start. */
  readonly evicted: number;
  /** Whether a socket was refused (its request, if it arrives, is not served). */
  isRefused(socket: Duplex): boolean;
}

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
  /** The port speaks TLS: a refused connection is closed without a plain-text answer. */
  tls = false,
  /** The process's budget of untrusted connections; default one of its own. */
  budget?: ConnectionBudget,
): UnjoinedLimit {
  const response = tls ? undefined : refusal(limit);
  const cap = createAddressCap({
    limit,
    trustProxy,
    budget,
    // the relay counts sockets only: an upgrade's holder is its socket
    refuse: (holder) => endRefused(holder as Duplex, response),
  });
  return {
    get refused() {
      return cap.refused;
    },
    get evicted() {
      return cap.evicted;
    },
    admit: (socket) => cap.admit(socket),
    admitRequest: (req, socket) => cap.admitRequest(req, socket),
    joined: (stream) => cap.release(stream),
    isRefused: (socket) => cap.isRefused(socket),
  };
}
