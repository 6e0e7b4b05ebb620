import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { NatsAccess } from '../config/nats-access.ts';
import type { Logger } from '../log.ts';
import { natsConnectOptions, warnIfAnonymous } from './nats-options.ts';

/**
 * Client pings: a NATS server that stops answering is noticed after about
 * `pingIntervalMs * (maxPingOut + 1)`, and the client reconnects (to another server of a
 * NATS cluster when there is one).
 */
const pingIntervalMs = 2_000;
const maxPingOut = 2;
/** Pause between two attempts while no server of the list answers. */
const retryMs = 1_000;

/**
 * Replicas of what the cluster stores in JetStream (streams and buckets): three when three or
 * more NATS servers are listed (nothing is lost with one server), else one.
 */
export function replicasFor(urls: readonly string[]): number {
  return urls.length >= 3 ? 3 : 1;
}

/**
 * One process's connection to NATS, made in the background and kept for its whole life: it
 * retries until a server answers and reconnects by itself after any loss. Nothing waits for it
 * at start, so a process starts while NATS is down.
 */
export interface NatsLink {
  /** The connection; undefined until the first successful connect. */
  readonly connection: NatsConnection | undefined;
  /** True while the connection is up. */
  readonly connected: boolean;
  /** Runs `listener` on every (re)connect, and at once when connected now. */
  onConnected(listener: (nc: NatsConnection) => void): void;
  /** Runs `listener` on every loss of the connection. */
  onDisconnected(listener: () => void): void;
  /** Closes the connection (pending publications are flushed) and stops retrying. */
  close(): Promise<void>;
}

/**
 * Opens a link to the NATS servers `urls` (tried in turn) with `access`'s credentials and CA;
 * `name` shows in the server's monitoring.
 */
export function openNatsLink(
  urls: readonly string[],
  name: string,
  logger: Logger,
  access: NatsAccess = {},
): NatsLink {
  const secured = natsConnectOptions(access);
  let lastRefusal = '';
  let connection: NatsConnection | undefined;
  let connected = false;
  let closing = false;
  let retry: NodeJS.Timeout | undefined;
  const upListeners: Array<(nc: NatsConnection) => void> = [];
  const downListeners: Array<() => void> = [];

  function up(nc: NatsConnection): void {
    connected = true;
    logger.info({ nats: nc.getServer() }, 'cluster: connected to NATS');
    for (const listener of upListeners) listener(nc);
  }

  function down(): void {
    if (!connected) return;
    connected = false;
    logger.warn('cluster: lost the connection to NATS; reconnecting');
    for (const listener of downListeners) listener();
  }

  async function follow(nc: NatsConnection): Promise<void> {
    for await (const status of nc.status()) {
      if (status.type === 'disconnect' || status.type === 'staleConnection') down();
      else if (status.type === 'reconnect') up(nc);
    }
  }

  async function attempt(): Promise<void> {
    retry = undefined;
    if (closing) return;
    try {
      const nc = await connect({
        servers: [...urls],
        // the first server of the list that answers: an operator lists the nearest first
        noRandomize: true,
        name,
        maxReconnectAttempts: -1,
        reconnectTimeWait: retryMs,
        pingInterval: pingIntervalMs,
        maxPingOut,
        timeout: 2_000,
        ...secured,
      });
      if (closing) {
        await nc.close();
        return;
      }
      connection = nc;
      lastRefusal = '';
      warnIfAnonymous(nc, access, logger);
      void follow(nc);
      void nc.closed().then(() => down());
      up(nc);
    } catch (err: unknown) {
      const why = String(err);
      // a refusal (credentials, TLS) is said once, until it changes: retried every second
      if (/auth|tls|certificate|permission/i.test(why) && why !== lastRefusal) {
        logger.warn({ err: why }, 'cluster: NATS refused the connection; retrying');
      } else logger.debug({ err: why }, 'cluster: NATS not reachable yet');
      lastRefusal = why;
      retry = setTimeout(() => void attempt(), retryMs);
    }
  }

  void attempt();

  return {
    get connection() {
      return connection;
    },
    get connected() {
      return connected;
    },
    onConnected(listener) {
      upListeners.push(listener);
      if (connected && connection !== undefined) listener(connection);
    },
    onDisconnected(listener) {
      downListeners.push(listener);
    },
    async close() {
      closing = true;
      if (retry !== undefined) clearTimeout(retry);
      const nc = connection;
      connection = undefined;
      if (nc !== undefined && !nc.isClosed()) await nc.drain().catch(() => nc.close());
    },
  };
}
