import type { RelayConfig } from '../config/relay-config.ts';
import type { ConnectionBudget } from '../connection-budget.ts';
import type { Logger } from '../log.ts';
import type { DocumentStore } from '../store/document-store.ts';
import type { RoomDirectory } from '../store/room-directory.ts';
import type { TlsContextSource } from '../tls/secure-port.ts';
import type { Broker } from './broker.ts';
import type { RelayMetrics } from './metrics.ts';
import type { RoomStatus } from './rooms.ts';
import { defaultShardCount } from './shards.ts';
import type { DeviceDirectory } from './stored-device-check.ts';

/**
 * Timings the protocol fixes and internal sizes that relay.conf does not expose; only tests and
 * the bench change them.
 */
export interface RelayTuning {
  /** A connection must join within this time or is closed with 4008. Default 10 s. */
  joinTimeoutMs: number;
  /** Server ping period; a connection that did not answer the previous ping is closed. Default 30 s. */
  pingIntervalMs: number;
  /** Period of the sweep that drops expired buffered messages. Default 10 s. */
  purgeIntervalMs: number;
  /** In-process room slots (djb2(roomId) modulo this). Default 16. */
  shardCount: number;
  /** close() waits this long for clients to acknowledge 1001 before cutting them. Default 2 s. */
  closeTimeoutMs: number;
  /** How long an expired device is remembered so that its next join reports `gap`. Default 24 h. */
  expiredRetentionMs: number;
  /**
   * The upgrade request (and any request on the status port) must arrive whole within this time,
   * as on the auth port, or the connection is cut. Default 10 s.
   */
  requestTimeoutMs: number;
  /** Open connections per client address on the status port (past it: 429). Default 16. */
  statusConnectionsPerAddress: number;
  /**
   * Period of the document store's sweep: documents of deleted projects removed, compaction.
   * Default 30 s.
   */
  storeSweepIntervalMs: number;
}

export const secondMs = 1_000;
const hourMs = 60 * 60 * secondMs;

export const defaultTuning: RelayTuning = {
  joinTimeoutMs: 10_000,
  pingIntervalMs: 30_000,
  purgeIntervalMs: 10_000,
  shardCount: defaultShardCount,
  closeTimeoutMs: 2_000,
  expiredRetentionMs: 24 * hourMs,
  requestTimeoutMs: 10 * secondMs,
  statusConnectionsPerAddress: 16,
  storeSweepIntervalMs: 30 * secondMs,
};

export interface RelayOptions {
  config: RelayConfig;
  /** Effective shared secret; '' disables token and room-id validation (warn loudly at start). */
  secret: string;
  logger: Logger;
  /** Injectable clock (ms) for the buffer window and revocation times; default Date.now. */
  now?: () => number;
  /** Protocol timings and internal sizes; only tests and the bench change them. */
  tuning?: Partial<RelayTuning>;
  /** Injectable timer for the heartbeat and the sweep; default `setInterval` (unref'd). */
  repeat?: Repeat;
  /**
   * The broker for what lies beyond this process (a cluster broker); default the in-process
   * one on the SQLite buffer.
   */
  broker?: Broker;
  /**
   * The auth side's record of devices (co-hosted: the auth database; on its own: the auth
   * service's relay feed). Set, a join's token must be the one stored for its device; unset,
   * signatures alone decide.
   */
  devices?: DeviceDirectory;
  /** Set, the WebSocket port speaks TLS (wss://) with this certificate. */
  tls?: TlsContextSource;
  /**
   * The document store. Default: with the in-process broker, store.db beside relay.db; with a
   * broker given (a cluster) or `null` (the bench, to measure the relay without it), none
   * (`append` and `catchup` are answered `store_unavailable`): a cluster node is given the
   * PostgreSQL store of `store.url` (`relay-switch.ts`).
   */
  store?: DocumentStore | null;
  /** Which rooms still have a project (co-hosted: the auth database); unset, none is forgotten. */
  rooms?: RoomDirectory;
  /**
   * The process's budget of untrusted connections (server/connection-budget.ts), shared with the
   * auth port when co-hosted. Default: the relay's own (both its ports), half the descriptor limit.
   */
  connectionBudget?: ConnectionBudget;
}

/** The relay's periodic tasks. */
export type RepeatedTask = 'heartbeat' | 'sweep' | 'store';

/** Runs `run` every `periodMs` until the returned function is called. */
export type Repeat = (task: RepeatedTask, periodMs: number, run: () => void) => () => void;

export const repeatEvery: Repeat = (_task, periodMs, run) => {
  const timer = setInterval(run, periodMs).unref();
  return () => clearInterval(timer);
};

export interface RelayStatus {
  rooms: number;
  connections: number;
  buffered: number;
  perRoom: RoomStatus[];
}

export interface Relay {
  /** Starts the WebSocket port and the status port (port 0 = ephemeral); resolves with the real ports. */
  listen(): Promise<{ wsPort: number; statusPort: number }>;
  /** Graceful: stop accepting, close sockets with 1001, flush the buffer, close SQLite. */
  close(): Promise<void>;
  /**
   * Revocation: close every connection of this device id with 4003 at once, and refuse its
   * tokens issued up to `revokedAt` (Unix seconds; default now).
   */
  revokeDevice(deviceId: number, revokedAt?: number): void;
  /**
   * A membership ended (teams): member `userId` of the project of room `roomId` is refused
   * there on grants of membership `memberId` and older, and its connections there close with 4003.
   */
  revokeMember(roomId: string, userId: number, memberId: number): void;
  /**
   * The auth side may have deleted devices that this relay was not told of (its feed was reset):
   * forgets the devices looked up so far and looks the connected ones up again, revoking those
   * that are gone. Rejects when the auth side cannot answer (the caller asks again later).
   */
  recheckDevices(): Promise<void>;
  status(): RelayStatus;
  /**
   * The document store's sweep, run now (it also runs every 30 s): the documents of deleted
   * projects are removed and the store compacted. Resolves at once without a store.
   */
  sweepStore(): Promise<void>;
  /** The document store; undefined when this relay keeps no documents (a cluster node without `store.url`). */
  readonly store: DocumentStore | undefined;
  /** The counters rendered on `/metrics`, read in-process (the bench reads them with its CPU clock). */
  readonly metrics: Readonly<RelayMetrics>;
}
