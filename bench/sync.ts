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
import { Server } from '@hocuspocus/server';
import * as Y from 'yjs';
import { registerProject, startTestHost, type TestHost } from '../test/helpers/host.ts';
import {
  bigDocument,
  copyOf,
  type Editor,
  hocuspocusEditor,
  median,
  relayEditor,
  until,
} from './yjs-bench.ts';

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
    editor: (doc, name) =>
      relayEditor(th.relayUrl, roomId, devices[next++ % devices.length]!, doc, name),
    close: () => th.close(),
  };
}

async function hocuspocusSystem(): Promise<System> {
  const server = new Server({ port: 0, quiet: true });
  await server.listen(0);
  const url = `ws://127.0.0.1:${server.address.port}`;
  return {
    name: 'Hocuspocus',
    editor: (doc, name) => hocuspocusEditor(url, doc, name),
    close: () => server.destroy(),
  };
}

async function coldCatchUp(system: System, round: number, source: Y.Doc) {
  const name = `cold-${round}`;
  const seed = copyOf(source);
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
