import type * as Y from 'yjs';
import { deriveE2EKey, type E2EKey } from '../e2e-key.ts';
import { Emitter } from '../emitter.ts';
import type { RelayConnection } from '../relay-connection.ts';
import { YjsProvider, type YjsProviderEvents } from '../yjs-provider.ts';
import { StoreCursor, type StoreProgress } from '../yjs-store-cursor.ts';
import type { ConnectionSupervisor } from './connection-supervisor.ts';

export interface SupervisedProviderOptions {
  supervisor: ConnectionSupervisor;
  doc: Y.Doc;
  /** The document's name in the room. Default `default`. */
  name?: string;
  /** End-to-end encryption (see `YjsProviderOptions.passphrase`); the key is derived once. */
  passphrase?: string;
  /** A key already derived from the passphrase for this room (taken instead of `passphrase`). */
  key?: E2EKey;
  /** PBKDF2 rounds. Default 600,000. */
  iterations?: number;
  /** The relay's `message.maxBytes`. Default 1 MiB. */
  maxMessageBytes?: number;
  /** The document's place on the host as a previous run left it. Default: none (from the start). */
  store?: StoreProgress;
}

/**
 * A Yjs provider that follows a `ConnectionSupervisor`: a provider is bound to one connection,
 * so each fresh connection gets a new `YjsProvider` on the same document (the old one is
 * destroyed). Its events are those of the current provider; `synced` turns false when a
 * connection ends and true again once the new one has synced.
 */
export class SupervisedYjsProvider extends Emitter<YjsProviderEvents> {
  private provider: YjsProvider;
  private stops: (() => void)[] = [];
  private readonly stopSupervisor: () => void;
  private isSynced = false;
  /** The document's place on the host, carried from one connection's provider to the next. */
  readonly store: StoreCursor;

  /** Use `superviseYjsProvider`, which derives the key first. */
  constructor(
    private readonly options: SupervisedProviderOptions,
    private readonly key: E2EKey | undefined,
  ) {
    super();
    this.store = new StoreCursor(options.store);
    this.provider = this.bind(options.supervisor.connection);
    this.stopSupervisor = options.supervisor.on('connection', (connection) => {
      this.provider = this.bind(connection);
    });
  }

  /** The provider of the current connection. */
  get current(): YjsProvider {
    return this.provider;
  }

  get synced(): boolean {
    return this.isSynced;
  }

  /** The other devices in the room. */
  get peers(): string[] {
    return this.provider.peers;
  }

  /** Resolves when `synced` is (or becomes) true, on whichever connection. */
  whenSynced(): Promise<void> {
    if (this.isSynced) return Promise.resolve();
    return new Promise((resolveSynced) => {
      const stop = this.on('synced', (synced) => {
        if (!synced) return;
        stop();
        resolveSynced();
      });
    });
  }

  /** Resolves once what was handed to the current connection has reached the relay. */
  flush(): Promise<void> {
    return this.provider.flush();
  }

  /** Stops following the supervisor and destroys the current provider (connections stay). */
  destroy(): void {
    this.stopSupervisor();
    for (const stop of this.stops.splice(0)) stop();
    this.provider.destroy();
  }

  private bind(connection: RelayConnection): YjsProvider {
    for (const stop of this.stops.splice(0)) stop();
    this.provider?.destroy();
    this.setSynced(false);
    const { doc, name, maxMessageBytes } = this.options;
    const provider = new YjsProvider(
      { connection, doc, name, maxMessageBytes, store: this.store },
      this.key,
    );
    this.stops = [
      provider.on('synced', (synced) => this.setSynced(synced)),
      provider.on('peers', (peers) => this.emit('peers', peers)),
      provider.on('error', (error) => this.emit('error', error)),
    ];
    return provider;
  }

  private setSynced(synced: boolean): void {
    if (this.isSynced === synced) return;
    this.isSynced = synced;
    this.emit('synced', synced);
  }
}

/**
 * A provider of `options.doc` over the supervisor's connections. With `passphrase` (and no
 * `key`), derives the key first (rejects with `invalid_passphrase` for an empty one).
 */
export async function superviseYjsProvider(
  options: SupervisedProviderOptions,
): Promise<SupervisedYjsProvider> {
  const key =
    options.key ??
    (options.passphrase === undefined
      ? undefined
      : await deriveE2EKey(
          options.passphrase,
          options.supervisor.connection.room,
          options.iterations,
        ));
  return new SupervisedYjsProvider(options, key);
}
