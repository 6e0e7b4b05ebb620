/**
 * `npm run bench:sync`: the Yjs provider through the sync-host relay against the same documents
 * through a Hocuspocus server (`@hocuspocus/server`), both in this process on loopback.
 *
 * - cold catch-up: a document of about 1 MiB made by 10,000 edits; a device with an empty
 *   document joins and catches up. Time until its text equals the source's, and the bytes its
 *   socket received and sent. Through the relay it catches up from the source device (online);
 *   through Hocuspocus from the server's copy.
 * - steady state: three editors of one document; one types 500 keystrokes (one character each,
 *   one every 5 ms) and the others receive them. Bytes on every client socket per keystroke, and
 *   the process CPU time per keystroke (servers and the three clients share the process, so it
 *   compares the two set-ups, it is not the server's cost alone).
 *
 * Three rounds each, alternating; medians.
 */
import { HocuspocusProvider, HocuspocusProviderWebsocket } from '@hocuspocus/provider';
import { Server } from '@hocuspocus/server';
import { WebSocket } from 'ws';
import * as Y from 'yjs';
import { createRelayConnection } from '../client/relay-connection.ts';
import { createYjsProvider } from '../client/yjs-provider.ts';
import { registerProject, startTestHost, type TestHost } from '../test/helpers/host.ts';

interface Bytes {
  received: number;
  sent: number;
}

/** `ws`'s WebSocket counting the bytes of every message it receives and sends. */
function countingWebSocket(bytes: Bytes) {
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
function bigDocument(): Y.Doc {
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

async function until(check: () => boolean, what: string, deadlineMs = 120_000): Promise<void> {
  const end = Date.now() + deadlineMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`${what} not reached`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1] ?? 0;

/** One editor (a doc on the wire) of either system. */
interface Editor {
  doc: Y.Doc;
  bytes: Bytes;
  close(): Promise<void>;
}

interface System {
  name: string;
  editor(doc: Y.Doc, name: string): Promise<Editor>;
  close(): Promise<void>;
}

async function relaySystem(): Promise<System> {
  const th: TestHost = await startTestHost({ ui: false });
  const devices: { deviceId: number; deviceToken: string }[] = [];
  for (let i = 0; i < 4; i += 1) devices.push(await th.signIn('bench@example.org', `d${i}`));
  const { roomId } = await registerProject(th.base, devices[0]!.deviceToken, 'bench');
  let next = 0;
  return {
    name: 'sync-host relay',
    async editor(doc, name) {
      const device = devices[next++ % devices.length]!;
      const bytes = { received: 0, sent: 0 };
      const connection = createRelayConnection({
        url: th.relayUrl,
        room: roomId,
        device: String(device.deviceId),
        token: device.deviceToken,
        WebSocket: countingWebSocket(bytes),
      });
      await connection.connect();
      const provider = await createYjsProvider({ connection, doc, name });
      await provider.whenSynced();
      return {
        doc,
        bytes,
        async close() {
          provider.destroy();
          await connection.close();
        },
      };
    },
    close: () => th.close(),
  };
}

async function hocuspocusSystem(): Promise<System> {
  const server = new Server({ port: 0, quiet: true });
  await server.listen(0);
  const url = `ws://127.0.0.1:${server.address.port}`;
  return {
    name: 'Hocuspocus',
    async editor(doc, name) {
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
    },
    close: () => server.destroy(),
  };
}

async function coldCatchUp(system: System, round: number, source: Y.Doc) {
  const name = `cold-${round}`;
  const seed = new Y.Doc();
  Y.applyUpdate(seed, Y.encodeStateAsUpdate(source));
  const holder = await system.editor(seed, name);
  const expected = seed.getText('text').toString();
  const started = performance.now();
  const cold = await system.editor(new Y.Doc(), name);
  await until(() => cold.doc.getText('text').length === expected.length, 'cold device caught up');
  const ms = performance.now() - started;
  if (cold.doc.getText('text').toString() !== expected) throw new Error('cold copy differs');
  const result = { ms, received: cold.bytes.received, sent: cold.bytes.sent };
  await cold.close();
  await holder.close();
  return result;
}

async function steadyState(system: System, round: number) {
  const name = `steady-${round}`;
  const editors: Editor[] = [];
  for (let i = 0; i < 3; i += 1) editors.push(await system.editor(new Y.Doc(), name));
  const [typist] = editors as [Editor];
  for (const editor of editors) editor.bytes.received = editor.bytes.sent = 0;
  const keystrokes = 500;
  const cpuBefore = process.cpuUsage();
  for (let i = 0; i < keystrokes; i += 1) {
    typist.doc.getText('text').insert(i, String.fromCharCode(97 + (i % 26)));
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  await until(
    () => editors.every((e) => e.doc.getText('text').length === keystrokes),
    'every editor has every keystroke',
  );
  const cpu = process.cpuUsage(cpuBefore);
  const wire = editors.reduce((sum, e) => sum + e.bytes.received + e.bytes.sent, 0);
  for (const editor of editors) await editor.close();
  return {
    bytesPerKeystroke: wire / keystrokes,
    cpuUsPerKeystroke: (cpu.user + cpu.system) / keystrokes,
  };
}

async function main(): Promise<void> {
  const source = bigDocument();
  const size = Y.encodeStateAsUpdate(source).length;
  console.log(
    `document: ${source.getText('text').length} characters, state ${(size / 1_048_576).toFixed(2)} MiB, 10,000 edits`,
  );
  const systems = [await relaySystem(), await hocuspocusSystem()];
  const results = new Map<
    string,
    {
      cold: Awaited<ReturnType<typeof coldCatchUp>>[];
      steady: Awaited<ReturnType<typeof steadyState>>[];
    }
  >();
  for (const system of systems) results.set(system.name, { cold: [], steady: [] });
  for (let round = 0; round < 3; round += 1) {
    for (const system of round % 2 === 0 ? systems : [...systems].reverse()) {
      const entry = results.get(system.name)!;
      entry.cold.push(await coldCatchUp(system, round, source));
      entry.steady.push(await steadyState(system, round));
    }
  }
  console.log(
    '| system | cold catch-up ms | cold bytes received | cold bytes sent | steady bytes per keystroke (3 editors, all sockets) | process CPU µs per keystroke |',
  );
  console.log('|---|---|---|---|---|---|');
  for (const [name, { cold, steady }] of results) {
    console.log(
      `| ${name} | ${median(cold.map((c) => c.ms)).toFixed(0)} | ${median(cold.map((c) => c.received))} | ${median(cold.map((c) => c.sent))} | ${median(steady.map((s) => s.bytesPerKeystroke)).toFixed(0)} | ${median(steady.map((s) => s.cpuUsPerKeystroke)).toFixed(0)} |`,
    );
  }
  for (const system of systems) await system.close();
}

await main();
