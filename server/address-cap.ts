import { type IncomingMessage, type Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { Server as TlsServer } from 'node:tls';
import { addressGroup } from './address-group.ts';
import { type ConnectionBudget, ownConnectionBudget } from './connection-budget.ts';
import { clientAddressOf } from './relay/client-address.ts';
import { rawConnectionListener, servesTls, tcpSocketOf } from './tls/secure-port.ts';

/** What a cap counts: a connection (its socket), or one request through a proxy (its response). */
export type CapHolder = Duplex | ServerResponse;

/**
 * A cap on what one client address holds open at once. A connection is counted from the TCP
 * accept by its peer address; a connection from a trusted reverse proxy (`TRUST_PROXY`) is not,
 * and its requests are counted instead by the forwarded client address (X-Forwarded-For read as
 * express's `trust proxy` reads it), once their headers have arrived, so that the clients behind
 * one proxy do not share one count. IPv6 addresses are counted by their /64. A holder is counted
 * until its `close` or `release`; one past the limit is handed to `refuse` and never counted.
 * A counted connection, and a refused one until it is closed, also takes its place in the
 * process's budget of untrusted connections (server/connection-budget.ts), which may close it
 * to make room for another address's (a request through a proxy holds no descriptor of its own:
 * it is not in the budget).
 */
export interface AddressCap {
  /** A TCP connection was accepted: counted, or refused when its address is at the limit. */
  admit(socket: Socket): boolean;
  /**
   * A request arrived: from a trusted proxy it is counted by its forwarded address in `holder`,
   * or refused at the limit; other requests pass (their connection was counted at accept).
   */
  admitRequest(req: IncomingMessage, holder: CapHolder): boolean;
  /** `holder` no longer counts (the relay: the connection joined a room). */
  release(holder: CapHolder): void;
  /** Whether `holder` was refused (its request, if it arrives, is not served). */
  isRefused(holder: CapHolder): boolean;
  /** Holders refused since the start. */
  readonly refused: number;
  /**
   * Connections of this cap (counted, or refused and not yet closed) the budget closed to make
   * room for another address, since the start.
   */
  readonly evicted: number;
}

export interface AddressCapOptions {
  limit: number;
  trustProxy?: readonly string[];
  /** Answers and closes a holder past the limit. */
  refuse(holder: CapHolder): void;
  /**
   * The process's budget of untrusted connections, shared by its caps (server/host.ts makes
   * one). Default: a budget of this cap's own, half the descriptor limit.
   */
  budget?: ConnectionBudget;
}

/** What a cap counts for `holder`: a response, or the TCP socket (under a TLS one). */
function holderOf(holder: CapHolder): CapHolder {
  return holder instanceof ServerResponse ? holder : (tcpSocketOf(holder) as CapHolder);
}

export function createAddressCap(options: AddressCapOptions): AddressCap {
  const { isProxy, addressOf } = clientAddressOf(options.trustProxy ?? []);
  const { count, release, refusedHolders, stats } = createCapLedger(options);
  return {
    get refused() {
      return stats.refused;
    },

    get evicted() {
      return stats.evicted;
    },

    admit(socket) {
      const peer = socket.remoteAddress ?? '';
      return isProxy(peer) || count(socket, peer);
    },

    admitRequest(req, holder) {
      const peer = req.socket.remoteAddress ?? '';
      if (!isProxy(peer)) return true;
      const forwarded = req.headers['x-forwarded-for'];
      return count(
        holder,
        addressOf(peer, Array.isArray(forwarded) ? forwarded.join(',') : forwarded),
      );
    },

    release,

    isRefused(holder) {
      return refusedHolders.has(holderOf(holder));
    },
  };
}

/**
 * What a cap counts: the open holders per address group, those refused, and the connection
 * budget's share of each (a holder the budget evicts is released and closed).
 */
function createCapLedger(options: AddressCapOptions) {
  const { limit, refuse } = options;
  const counts = new Map<string, number>();
  const counted = new WeakMap<CapHolder, string>();
  const refusedHolders = new WeakSet<CapHolder>();
  const budget = options.budget ?? ownConnectionBudget();
  const stats = { refused: 0, evicted: 0 };

  /** Counts `holder` for `address`, or refuses it when the address is full. */
  function count(given: CapHolder, address: string): boolean {
    // a TLS socket is counted as the TCP socket under it, which was admitted at accept
    const holder = holderOf(given);
    if (counted.has(holder)) return true;
    const key = addressGroup(address);
    const open = counts.get(key) ?? 0;
    if (open >= limit) {
      stats.refused++;
      refusedHolders.add(holder);
      // until it is closed (up to a second after its answer) it holds a descriptor too
      if (!(holder instanceof ServerResponse)) {
        budget.take(key, holder, () => evict(holder));
        holder.once('close', () => budget.release(holder));
      }
      // answered on what was given: over TLS, the answer goes through it
      refuse(given);
      return false;
    }
    counts.set(key, open + 1);
    counted.set(holder, key);
    holder.on('close', releaseOnClose);
    if (!(holder instanceof ServerResponse)) budget.take(key, holder, () => evict(holder));
    return true;
  }

  /** The budget closes `holder` to make room for another address. */
  function evict(holder: Duplex): void {
    stats.evicted++;
    release(holder);
    holder.destroy();
  }

  /** One listener for every counted holder (`this`): nothing kept per released one. */
  function releaseOnClose(this: CapHolder): void {
    release(this);
  }

  function release(given: CapHolder): void {
    const holder = holderOf(given);
    const key = counted.get(holder);
    if (key === undefined) return;
    counted.delete(holder);
    holder.off('close', releaseOnClose);
    budget.release(holder);
    const left = (counts.get(key) ?? 1) - 1;
    if (left <= 0) counts.delete(key);
    else counts.set(key, left);
  }

  return { count, release, refusedHolders, stats };
}

/** How long a refused connection may take to close after its answer before it is cut. */
const refusedLingerMs = 1_000;

/**
 * Ends `stream` with `response` (raw bytes; nothing on a TLS connection), then cuts it if the
 * client has not closed its side within a second: it must not keep the descriptor.
 */
export function endRefused(stream: Duplex, response: string | undefined): void {
  stream.on('error', () => {});
  if (response === undefined) stream.destroy();
  else stream.end(response);
  setTimeout(() => stream.destroy(), refusedLingerMs).unref();
}

/**
 * Caps the open connections (and, from a trusted proxy, the requests in progress) per client
 * address of an HTTP server: one past `limit` is answered 429 `rate_limited` in the error shape
 * of the HTTP API (`Retry-After: 10`) and closed, so that slow connections from one address
 * cannot take the descriptors everyone else needs. Call it once the server's request listeners
 * are in place: it runs them only for requests it admits.
 */
export function capConnectionsPerAddress(
  server: Server,
  limit: number,
  trustProxy: readonly string[] = [],
  /** The process's budget of untrusted connections; default one of this cap's own. */
  budget?: ConnectionBudget,
): AddressCap {
  const body = JSON.stringify({
    error: {
      code: 'rate_limited',
      message: `too many open connections from this address (at most ${limit}); retry later`,
    },
  });
  const headers = {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': String(Buffer.byteLength(body)),
    'Retry-After': '10',
    Connection: 'close',
  };
  const raw = `HTTP/1.1 429 Too Many Requests\r\n${Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('')}\r\n${body}`;
  // a TLS connection is refused before its handshake: no plain-text answer on it
  const encrypted = server instanceof TlsServer;
  const cap = createAddressCap({
    limit,
    trustProxy,
    budget,
    refuse(holder) {
      if (holder instanceof ServerResponse) {
        holder.shouldKeepAlive = false;
        holder.writeHead(429, headers).end(body);
      } else endRefused(holder, encrypted || servesTls(server) ? undefined : raw);
    },
  });
  // At accept, on the TCP socket, also when the port speaks TLS (see rawConnectionListener).
  const onConnection = Object.assign((socket: Socket) => cap.admit(socket), {
    [rawConnectionListener]: true,
  });
  server.on('connection', onConnection);
  const listeners = server.listeners('request') as Array<
    (req: IncomingMessage, res: ServerResponse) => void
  >;
  server.removeAllListeners('request');
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (cap.isRefused(req.socket)) {
      req.socket.destroy();
      return;
    }
    if (!cap.admitRequest(req, res)) return;
    for (const listener of listeners) listener.call(server, req, res);
  });
  return cap;
}
