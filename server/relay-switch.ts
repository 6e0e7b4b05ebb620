import { hostname } from 'node:os';
import type { MemberRevocation } from '../protocol/room-grant.ts';
import { createClusterBroker } from './cluster/cluster-broker.ts';
import { natsAccessOf } from './config/nats-access.ts';
import type { RelayConfig } from './config/relay-config.ts';
import type { ConnectionBudget } from './connection-budget.ts';
import type { Logger } from './log.ts';
import type { Broker } from './relay/broker.ts';
import { createRelay, type Relay } from './relay/relay.ts';
import type { DeviceDirectory } from './relay/stored-device-check.ts';
import { bufferOpenError, relayListenError } from './start-errors.ts';
import { openClusterStore } from './store/cluster-store.ts';
import type { RoomDirectory } from './store/room-directory.ts';
import type { TlsContextSource } from './tls/secure-port.ts';

export interface RelaySwitchOptions {
  config: RelayConfig;
  /** The relay's effective secret. */
  secret: string;
  logger: Logger;
  now?: () => number;
  /** Where joins are checked (`revocation-paths.ts`); undefined: signatures alone. */
  devices: DeviceDirectory | undefined;
  /** The relay port's certificate (WSS); undefined: plain ws://. */
  tls?: TlsContextSource;
  /** Which rooms still have a project (co-hosted: the auth database), for the document store. */
  rooms?: RoomDirectory;
  /** The process's budget of untrusted connections, kept across a pause. */
  connectionBudget?: ConnectionBudget;
}

type Ports = { wsPort: number; statusPort: number };

/**
 * The broker of the relay's configuration: the cluster's on NATS with `cluster.nats`, else none
 * given (the relay opens the single-node broker on its SQLite buffer).
 */
function brokerFor(options: RelaySwitchOptions): Broker | undefined {
  const { config, logger, now } = options;
  if (config.clusterNats.length === 0) return undefined;
  return createClusterBroker({
    urls: config.clusterNats,
    node: config.clusterNode ?? `${hostname()}:${config.wsPort}`,
    bufferWindowMs: config.bufferSeconds * 1000,
    secret: options.secret,
    access: natsAccessOf(config),
    logger,
    now,
  });
}

/**
 * In a cluster, the document store all nodes share (`store.url`); else none given (the relay
 * opens store.db beside relay.db).
 */
function storeFor(options: RelaySwitchOptions) {
  const { config, logger, now } = options;
  if (config.clusterNats.length === 0) {
    if (config.storeUrl !== undefined) {
      logger.warn(
        'store.url is set but this relay is not a cluster node: it keeps its documents in store.db',
      );
    }
    return undefined;
  }
  return openClusterStore(config, logger, now ?? Date.now);
}

/**
 * The host's relay, started, paused (the tray app) and resumed on the same ports. Owns what a
 * pause must not lose: devices deleted while paused are revoked in the relay when it resumes.
 */
export class RelaySwitch {
  readonly #options: RelaySwitchOptions;
  #relay: Relay | undefined;
  #paused = false;
  #ports: Ports | undefined;
  /** Devices deleted while the relay is paused: replayed into the relay when it resumes. */
  readonly #revokedWhilePaused = new Set<number>();
  readonly #membersRemovedWhilePaused: MemberRevocation[] = [];

  constructor(options: RelaySwitchOptions) {
    this.#options = options;
  }

  /** The running relay; undefined before the start and while paused. */
  get relay(): Relay | undefined {
    return this.#relay;
  }

  /** Whether the relay is stopped by `pause` and may be resumed. */
  get paused(): boolean {
    return this.#paused;
  }

  /** Starts the relay (on `ports` when given); resolves with the real ports. */
  async start(ports?: Ports): Promise<Ports> {
    const { config, secret, logger, now, devices, tls, rooms, connectionBudget } = this.#options;
    let relay: Relay;
    try {
      relay = createRelay({
        config: ports ? { ...config, ...ports } : config,
        secret,
        logger,
        now,
        devices,
        tls,
        rooms,
        connectionBudget,
        broker: brokerFor(this.#options),
        store: storeFor(this.#options),
      });
    } catch (err: unknown) {
      throw bufferOpenError(err, config);
    }
    for (const deviceId of this.#revokedWhilePaused) relay.revokeDevice(deviceId);
    this.#revokedWhilePaused.clear();
    for (const member of this.#membersRemovedWhilePaused) {
      relay.revokeMember(member.roomId, member.userId, member.memberId);
    }
    this.#membersRemovedWhilePaused.length = 0;
    this.#relay = relay;
    try {
      this.#ports = await relay.listen();
    } catch (err: unknown) {
      this.#relay = undefined;
      await relay.close();
      throw relayListenError(err, config);
    }
    return this.#ports;
  }

  /** A deleted device: revoked in the relay now, or when it resumes. */
  revoke(deviceId: number, revokedAt?: number): void {
    if (this.#relay) this.#relay.revokeDevice(deviceId, revokedAt);
    else if (this.#paused) this.#revokedWhilePaused.add(deviceId);
  }

  /** An ended membership: revoked in the relay now, or when it resumes. */
  revokeMember(member: MemberRevocation): void {
    if (this.#relay) this.#relay.revokeMember(member.roomId, member.userId, member.memberId);
    else if (this.#paused) this.#membersRemovedWhilePaused.push(member);
  }

  /** Closes the relay (clients get 1001 and reconnect later); a no-op without a running relay. */
  async pause(): Promise<void> {
    const relay = this.#relay;
    if (relay === undefined) return;
    this.#relay = undefined;
    this.#paused = true;
    await relay.close();
    this.#options.logger.info('relay paused');
  }

  /** Starts the relay again on the same ports after `pause`. */
  async resume(): Promise<void> {
    if (!this.#paused || this.#relay !== undefined) return;
    await this.start(this.#ports);
    this.#paused = false;
    this.#options.logger.info('relay resumed');
  }

  /** Shutdown. */
  async close(): Promise<void> {
    this.#paused = false;
    await this.#relay?.close();
  }
}
