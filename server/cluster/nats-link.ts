import {
  type ConnectionOptions,
  connect,
  type NatsConnection,
  type Subscription,
} from '@nats-io/transport-node';
import type { NatsAccess } from '../config/nats-access.ts';
import type { Logger } from '../log.ts';
import {
  acceptsAnonymous,
  natsConnectOptions,
  openNatsProblem,
  warnIfAnonymous,
} from './nats-options.ts';

/**
 * Client pings: a NATS server that stops answering is noticed after about
 * `pingIntervalMs * (maxPingOut + 1)`, and the client reconnects (to another server of a
 * NATS cluster when there is one).
 */
const pingIntervalMs = 2_000;
const maxPingOut = 2;
/** Pause between two attempts while no server of the list answers. */
const retryMs = 1_000;
/** Pause before connecting again to a NATS refused for letting in clients without credentials. */
const refusedRetryMs = 5_000;

/**
 * Replicas of what the cluster stores in JetStream (streams and buckets): three when three or
 * more NATS servers are listed (nothing is lost with one server), else one.
 */
export function replicasFor(urls: readonly string[]): number {
  return urls.length >= 3 ? 3 : 1;
}

/**
 * A handle on the process's connection to NATS, made in the background and kept for its whole
 * life: it retries until a server answers and reconnects by itself after any loss. Nothing waits
 * for it at start, so a process starts while NATS is down.
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
  /**
   * Closes the handle (its pending publications are flushed); the last handle closes the
   * connection and stops retrying.
   */
  close(): Promise<void>;
}

/** One listener pair of a `NatsLink` handle. */
interface Listeners {
  up: Array<(nc: NatsConnection) => void>;
  down: Array<() => void>;
}

/** The process's connection to one list of NATS servers, and the handles opened on it. */
interface SharedLink {
  readonly connection: NatsConnection | undefined;
  readonly connected: boolean;
  readonly handles: Set<Listeners>;
  close(): Promise<void>;
}

/**
 * The process's NATS connections, one per list of servers: the relay's broker, its revocation
 * follower and its device checks, and a co-hosted auth service's publisher share it.
 */
const sharedLinks = new Map<string, SharedLink>();

/**
 * Opens a link to the NATS servers `urls` (tried in turn) with `access`'s credentials and CA: a
 * handle on the process's one connection to them with those credentials, made by the first
 * handle (`name` shows in the server's monitoring) and closed with the last.
 */
export function openNatsLink(
  urls: readonly string[],
  name: string,
  logger: Logger,
  access: NatsAccess = {},
): NatsLink {
  const key = `${urls.join(',')}\n${JSON.stringify(access)}`;
  let shared = sharedLinks.get(key);
  if (shared === undefined) {
    const made = connectLink(urls, name, logger, access);
    sharedLinks.set(key, made);
    shared = made;
  }
  const link = shared;
  const listeners: Listeners = { up: [], down: [] };
  link.handles.add(listeners);
  let closed = false;
  return {
    get connection() {
      return closed ? undefined : link.connection;
    },
    get connected() {
      return !closed && link.connected;
    },
    onConnected(listener) {
      listeners.up.push(listener);
      if (link.connected && link.connection !== undefined) listener(link.connection);
    },
    onDisconnected(listener) {
      listeners.down.push(listener);
    },
    async close() {
      if (closed) return;
      closed = true;
      link.handles.delete(listeners);
      if (link.handles.size > 0) {
        // the others keep the connection: what this handle published is sent now
        await link.connection?.flush().catch(() => {});
        return;
      }
      if (sharedLinks.get(key) === link) sharedLinks.delete(key);
      await link.close();
    },
  };
}

/** How the process's connection is made and kept: reconnected for ever, pinged, TLS and credentials. */
function connectOptions(
  urls: readonly string[],
  name: string,
  secured: ReturnType<typeof natsConnectOptions>,
): ConnectionOptions {
  return {
    servers: [...urls],
    // the first server of the list that answers: an operator lists the nearest first
    noRandomize: true,
    name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: retryMs,
    pingInterval: pingIntervalMs,
    maxPingOut,
    timeout: 2_000,
    // no Error object (and its stack) made ahead of every request and publish for a trace
    // that is only read when one fails: a few per cent of a node's CPU per message
    noAsyncTraces: true,
    ...secured,
  };
}

/**
 * Says why NATS could not be used, each reason once until it changes (a process retries for
 * ever): a refusal (credentials, TLS) as a warning, a server that lets anyone in as an error.
 */
function refusalLog(logger: Logger) {
  let last = '';
  const changed = (why: string) => {
    const fresh = why !== last;
    last = why;
    return fresh;
  };
  return {
    cleared(): void {
      last = '';
    },
    failed(err: unknown): void {
      const why = String(err);
      if (/auth|tls|certificate|permission/i.test(why) && changed(why)) {
        logger.warn({ err: why }, 'cluster: NATS refused the connection; retrying');
      } else {
        changed(why);
        logger.debug({ err: why }, 'cluster: NATS not reachable yet');
      }
    },
    open(server: string): void {
      const why = openNatsProblem(server);
      if (changed(why)) logger.error({ nats: server }, `cluster: refused: ${why}`);
    },
  };
}

/** Whether the connection is up; each change said in the log and to every handle's listeners. */
function connectionState(handles: Set<Listeners>, logger: Logger) {
  let connected = false;
  return {
    get connected() {
      return connected;
    },
    up(nc: NatsConnection): void {
      connected = true;
      logger.info({ nats: nc.getServer() }, 'cluster: connected to NATS');
      for (const { up: listeners } of [...handles]) for (const listener of listeners) listener(nc);
    },
    down(): void {
      if (!connected) return;
      connected = false;
      logger.warn('cluster: lost the connection to NATS; reconnecting');
      for (const { down: listeners } of [...handles]) for (const listener of listeners) listener();
    },
  };
}

/** Connects to `urls` in the background, again until a server answers, for the whole process. */
function connectLink(
  urls: readonly string[],
  name: string,
  logger: Logger,
  access: NatsAccess,
): SharedLink {
  const secured = natsConnectOptions(access);
  const refusals = refusalLog(logger);
  let connection: NatsConnection | undefined;
  let closing = false;
  let retry: NodeJS.Timeout | undefined;
  const handles = new Set<Listeners>();
  const state = connectionState(handles, logger);
  const up = (nc: NatsConnection) => state.up(nc);
  const down = () => state.down();

  /** Whether `nc` reached a NATS that lets anyone in and `access` refuses it (then closed). */
  async function refusedAsOpen(nc: NatsConnection): Promise<boolean> {
    if (access.refuseOpen !== true || !(await acceptsAnonymous(nc, access))) return false;
    refusals.open(nc.getServer());
    await nc.close().catch(() => {});
    if (!closing) retry = setTimeout(() => void attempt(), refusedRetryMs);
    return true;
  }

  async function follow(nc: NatsConnection): Promise<void> {
    for await (const status of nc.status()) {
      if (status.type === 'disconnect' || status.type === 'staleConnection') down();
      else if (status.type === 'reconnect') void refusedAsOpen(nc).then((no) => no || up(nc));
    }
  }

  async function attempt(): Promise<void> {
    retry = undefined;
    if (closing) return;
    try {
      const nc = await connect(connectOptions(urls, name, secured));
      if (closing) return await nc.close();
      if (await refusedAsOpen(nc)) return;
      connection = nc;
      refusals.cleared();
      warnIfAnonymous(nc, access, logger);
      void follow(nc);
      void nc.closed().then(() => down());
      up(nc);
    } catch (err: unknown) {
      refusals.failed(err);
      retry = setTimeout(() => void attempt(), retryMs);
    }
  }

  void attempt();

  return {
    get connection() {
      return connection;
    },
    get connected() {
      return state.connected;
    },
    handles,
    async close() {
      closing = true;
      if (retry !== undefined) clearTimeout(retry);
      const nc = connection;
      connection = undefined;
      if (nc !== undefined && !nc.isClosed()) await nc.drain().catch(() => nc.close());
    },
  };
}

/**
 * Answers the requests on `subject` on every connection of `link`: `answer` gets a request's text
 * and a function to respond with (it may stay silent). Returns the stop function.
 */
export function answerRequests(
  link: NatsLink,
  subject: string,
  answer: (data: string, respond: (text: string) => void) => Promise<void>,
): { stop(): void } {
  let subscription: Subscription | undefined;
  let subscribed: NatsConnection | undefined;
  // A reconnect keeps the connection object and its subscriptions: subscribe once per object.
  link.onConnected((nc) => {
    if (subscribed === nc) return;
    subscribed = nc;
    subscription = nc.subscribe(subject, {
      callback: (err, msg) => {
        if (err !== null) return;
        void answer(msg.string(), (text) => msg.respond(text));
      },
    });
  });
  return {
    stop() {
      subscription?.unsubscribe();
    },
  };
}
