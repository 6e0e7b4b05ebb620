import { type AuthClient, createAuthClient } from './auth-client.ts';
import type { Project } from './auth-types.ts';
import { SyncError } from './errors.ts';
import {
  createRelayConnection,
  type RelayConnection,
  type RelayConnectionOptions,
  type WebSocketConstructor,
} from './relay-connection.ts';
import {
  deviceTokenIds,
  parseSettings,
  type SyncSettings,
  type SyncSettingsInput,
} from './settings.ts';

export interface SyncClientOptions {
  /** Default: the global `WebSocket`; pass `ws`'s `WebSocket` on Node 20. */
  WebSocket?: WebSocketConstructor;
  /** Default: the global `fetch`. */
  fetch?: typeof fetch;
  /**
   * Makes the pinned `fetch` and `WebSocket` for `syncFingerprint`: `pinTo` of
   * `client/pinning.ts` in Node. Without it a fingerprint is refused in Node and left to the
   * browser's own trust in a browser.
   */
  pin?: (fingerprint: string) => { fetch: typeof fetch; WebSocket: WebSocketConstructor };
  /** Tuning passed to every relay connection (backoff, queue size, timeouts). */
  connection?: Omit<RelayConnectionOptions, 'url' | 'room' | 'device' | 'token' | 'WebSocket'>;
}

/**
 * What an editor integration holds: the four settings, the auth service and the relay
 * connections of its projects. Nothing touches the network while `syncEnabled` is false;
 * turning it off closes every connection.
 */
export class SyncClient {
  private current: SyncSettings;
  private readonly options: SyncClientOptions;
  private readonly connections = new Set<RelayConnection>();

  /** Throws a `SettingsError` naming each invalid setting. */
  constructor(settings: SyncSettingsInput = {}, options: SyncClientOptions = {}) {
    this.current = parseSettings(settings);
    this.options = options;
  }

  /** The validated settings (defaults filled in). */
  get settings(): Readonly<SyncSettings> {
    return this.current;
  }

  /**
   * Changes settings (validated as a whole). Disabling sync, or changing an address or the
   * token, closes the open connections (without `leave`: the relay keeps buffering for them).
   */
  async updateSettings(changes: SyncSettingsInput): Promise<SyncSettings> {
    const next = parseSettings({ ...this.current, ...changes });
    const reconnectNeeded =
      !next.syncEnabled ||
      next.syncRelayUrl !== this.current.syncRelayUrl ||
      next.syncFingerprint !== this.current.syncFingerprint ||
      next.syncDeviceToken !== this.current.syncDeviceToken;
    this.current = next;
    if (reconnectNeeded) await this.closeConnections({ leave: false });
    return next;
  }

  /** The auth service client (with the device token when there is one). Needs `syncEnabled`. */
  get auth(): AuthClient {
    this.requireEnabled();
    return createAuthClient({
      authUrl: this.current.syncAuthUrl,
      deviceToken: this.current.syncDeviceToken || undefined,
      fetch: this.transport().fetch,
    });
  }

  /** The fetch and WebSocket to use: pinned to `syncFingerprint` when it is set (in Node). */
  private transport(): { fetch?: typeof fetch; WebSocket?: WebSocketConstructor } {
    const fingerprint = this.current.syncFingerprint;
    if (fingerprint === undefined) return this.options;
    if (this.options.pin !== undefined) return this.options.pin(fingerprint);
    const inNode = (globalThis as { process?: { versions?: { node?: string } } }).process?.versions
      ?.node;
    if (inNode === undefined) return this.options;
    throw new SyncError(
      'invalid_options',
      'syncFingerprint needs the pinning of client/pinning.ts in Node: new SyncClient(settings, { pin: pinTo })',
    );
  }

  /**
   * Registers the workspace (idempotent by `projectKey`) and joins its room. Resolves once
   * joined; the connection then reconnects by itself until closed.
   */
  async openProject(
    projectKey: string,
    name: string,
  ): Promise<{ project: Project; connection: RelayConnection }> {
    const { project } = await this.auth.registerProject(projectKey, name);
    const connection = this.joinRoom(project.roomId);
    try {
      await connection.connect();
    } catch (err: unknown) {
      this.connections.delete(connection);
      throw err;
    }
    return { project, connection };
  }

  /** A connection to a room with this device (not yet connected: call `connect()`). */
  joinRoom(roomId: string): RelayConnection {
    this.requireEnabled();
    const token = this.current.syncDeviceToken;
    const ids = deviceTokenIds(token);
    if (ids === undefined) throw new SyncError('not_signed_in', 'sign in first (no device token)');
    const connection = createRelayConnection({
      ...this.options.connection,
      url: this.current.syncRelayUrl,
      room: roomId,
      device: String(ids.deviceId),
      token,
      WebSocket: this.transport().WebSocket,
    });
    this.connections.add(connection);
    connection.on('close', () => this.connections.delete(connection));
    return connection;
  }

  /** Closes every connection (with `leave` unless told otherwise). */
  async closeConnections(options: { leave?: boolean } = {}): Promise<void> {
    await Promise.all([...this.connections].map((connection) => connection.close(options)));
  }

  private requireEnabled(): void {
    if (!this.current.syncEnabled) {
      throw new SyncError('sync_disabled', 'sync is disabled (syncEnabled is false)');
    }
  }
}
