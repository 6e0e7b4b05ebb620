import { WebSocket } from 'ws';
import * as Y from 'yjs';
import {
  createRelayConnection,
  type RelayConnection,
  type WebSocketConstructor,
} from '../../client/relay-connection.ts';
import type { JoinedFrame } from '../../client/relay-frames.ts';
import {
  createYjsProvider,
  type YjsProvider,
  type YjsProviderOptions,
} from '../../client/yjs-provider.ts';
import { registerProject, type TestHost } from '../helpers/host.ts';
import { eventually } from '../helpers/wait.ts';

/** One signed-in device of the room's user. */
export interface RoomDevice {
  deviceId: number;
  deviceToken: string;
}

/** Devices of one user with one project, on an in-process host. */
export interface YjsRoom {
  roomId: string;
  devices: RoomDevice[];
  /** A joined connection of `devices[index]` (closed in `close()`); `joined` its first frame. */
  connect(
    index: number,
    options?: { maxMessageBytes?: number; WebSocket?: WebSocketConstructor },
  ): Promise<{ connection: RelayConnection; joined: JoinedFrame }>;
  /** A provider of a new (or the given) doc on a new joined connection of `devices[index]`. */
  provider(
    index: number,
    options?: Omit<YjsProviderOptions, 'connection'> & { connection?: RelayConnection },
  ): Promise<YjsProvider>;
  close(): Promise<void>;
}

/** Signs `count` devices of `email` in and registers project `projectKey` for them. */
export async function openYjsRoom(
  th: TestHost,
  email: string,
  projectKey: string,
  count: number,
): Promise<YjsRoom> {
  const devices: RoomDevice[] = [];
  for (let i = 0; i < count; i += 1) devices.push(await th.signIn(email, `device-${i}`));
  const first = devices[0];
  if (first === undefined) throw new Error('a room needs a device');
  const { roomId } = await registerProject(th.base, first.deviceToken, projectKey);
  const connections: RelayConnection[] = [];
  const providers: YjsProvider[] = [];

  const connect: YjsRoom['connect'] = async (index, options = {}) => {
    const device = devices[index];
    if (device === undefined) throw new Error(`no device ${index}`);
    const connection = createRelayConnection({
      url: th.relayUrl,
      room: roomId,
      device: String(device.deviceId),
      token: device.deviceToken,
      WebSocket: options.WebSocket ?? WebSocket,
      backoff: { initialDelayMs: 20, maxDelayMs: 200 },
      maxMessageBytes: options.maxMessageBytes,
    });
    connections.push(connection);
    return { connection, joined: await connection.connect() };
  };

  return {
    roomId,
    devices,
    connect,
    async provider(index, options = {}) {
      const connection =
        options.connection ??
        (await connect(index, { maxMessageBytes: options.maxMessageBytes })).connection;
      const provider = await createYjsProvider({ ...options, connection });
      providers.push(provider);
      return provider;
    },
    async close() {
      for (const provider of providers) provider.destroy();
      await Promise.all(connections.map((c) => c.close().catch(() => undefined)));
    },
  };
}

/** The text of `name` in each provider's doc. */
export function texts(providers: YjsProvider[], name = 'text'): string[] {
  return providers.map((provider) => provider.doc.getText(name).toString());
}

/** Waits until every provider's doc holds the same content (state vectors and text). */
export async function converged(providers: YjsProvider[], name = 'text'): Promise<string> {
  return eventually(
    () => {
      const vectors = providers.map((p) => Y.encodeStateVector(p.doc).join(','));
      const all = texts(providers, name);
      return new Set(vectors).size === 1 && new Set(all).size === 1 ? all[0] : undefined;
    },
    'convergence',
    15_000,
  );
}
