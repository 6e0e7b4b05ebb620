/** What bench/sync.ts and bench/sync-store.ts share: byte counting, the big document, waiting. */
import { HocuspocusProvider, HocuspocusProviderWebsocket } from '@hocuspocus/provider';
import { WebSocket } from 'ws';
import * as Y from 'yjs';
import { createRelayConnection } from '../client/relay-connection.ts';
import { createYjsProvider, type YjsProvider } from '../client/yjs-provider.ts';

export interface Bytes {
  received: number;
  sent: number;
}

/** `ws`'s WebSocket counting the bytes of every message it receives and sends. */
export function countingWebSocket(bytes: Bytes) {
  return class CountingWebSocket extends WebSocket {
    constructor(url: string | URL, protocols?: string | string[]) {
      super(url, protocols);
      this.on('message', (data: Buffer | ArrayBuffer | Buffer[]) => {
        bytes.received += Array.isArray(data)
          ? data.reduce((sum, part) => sum + part.length, 0)
          : data instanceof ArrayBuffer
            ? data.byteLength
            : data.length;
      });
    }
    override send(data: unknown, ...rest: unknown[]): void {
      bytes.sent +=
        typeof data === 'string' ? Buffer.byteLength(data) : (data as Uint8Array).byteLength;
      (super.send as (...args: unknown[]) => void)(data, ...rest);
    }
  };
}

/** A document of about 1 MiB made by 10,000 inserts at pseudo-random places. */
export function bigDocument(): Y.Doc {
  const doc = new Y.Doc();
  const text = doc.getText('text');
  let seed = 7;
  const random = () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  for (let i = 0; i < 10_000; i += 1) {
    text.insert(Math.floor(random() * text.length), `edit ${i} ${'lorem ipsum '.repeat(8)}\n`);
  }
  return doc;
}

/** A copy of `source` in a new `Y.Doc` (another client id, as another device). */
export function copyOf(source: Y.Doc): Y.Doc {
  const copy = new Y.Doc();
  Y.applyUpdate(copy, Y.encodeStateAsUpdate(source));
  return copy;
}

export async function until(check: () => boolean, what: string, deadlineMs = 120_000) {
  const end = Date.now() + deadlineMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`${what} not reached`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

export const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[values.length >> 1] ?? 0;

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** One editor (a doc on the wire) of either system. */
export interface Editor {
  doc: Y.Doc;
  bytes: Bytes;
  close(): Promise<void>;
}

/** A signed-in device of the relay bench's host. */
export interface RelayDevice {
  deviceId: number;
  deviceToken: string;
}

export type RelayEditor = Editor & { provider: YjsProvider };

/** The Yjs provider on a relay connection of `device`, synced (caught up with the host). */
export async function relayEditor(
  relayUrl: string,
  room: string,
  device: RelayDevice,
  doc: Y.Doc,
  name: string,
  /** Outgoing frames per second; default the client's (150). */
  ratePerSecond?: number,
): Promise<RelayEditor> {
  const bytes = { received: 0, sent: 0 };
  const connection = createRelayConnection({
    url: relayUrl,
    room,
    device: String(device.deviceId),
    token: device.deviceToken,
    WebSocket: countingWebSocket(bytes),
    ...(ratePerSecond === undefined ? {} : { ratePerSecond, rateBurst: ratePerSecond }),
  });
  await connection.connect();
  const provider = await createYjsProvider({ connection, doc, name });
  await provider.whenSynced();
  return {
    doc,
    bytes,
    provider,
    async close() {
      provider.destroy();
      await connection.close();
    },
  };
}

/** A Hocuspocus provider of `doc`, synced and with its changes confirmed by the server. */
export async function hocuspocusEditor(url: string, doc: Y.Doc, name: string): Promise<Editor> {
  const bytes = { received: 0, sent: 0 };
  const websocketProvider = new HocuspocusProviderWebsocket({
    url,
    WebSocketPolyfill: countingWebSocket(bytes),
  });
  const provider = new HocuspocusProvider({ websocketProvider, name, document: doc });
  provider.attach();
  await new Promise<void>((resolve) => {
    if (provider.isSynced) resolve();
    else provider.on('synced', () => resolve());
  });
  await until(() => !provider.hasUnsyncedChanges, 'changes confirmed by the server');
  return {
    doc,
    bytes,
    async close() {
      provider.destroy();
      websocketProvider.destroy();
    },
  };
}
