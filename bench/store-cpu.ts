/**
 * The relay's CPU per delivered message on a document workload, with the document store on
 * and off (the last part of `npm run bench:sync-store`). Two relay processes
 * (bench/server.ts `relay`, and `relay store-off`: createRelay with `store: null`, which answers
 * `append` and `catchup` with `store_unavailable`, so the providers stop appending); in each,
 * 20 rooms of 3 devices with the Yjs provider on one document, and one typist per room typing
 * a character every 10 ms (2,000 keystrokes/s, 4,000 delivered messages/s). With the store on,
 * the typists' edits of each 0.3 s are one append (the provider merges them), and every 200 entries a snapshot. Windows of 4 s alternate
 * between the two relays; a window ends once every keystroke reached the other two devices and
 * the typists' appends were acknowledged. Server CPU from `process.cpuUsage()` inside the relay
 * process, divided by the messages it delivered in the window; the first window of each is a
 * warm-up. `BENCH_CPU_PROF=store`: a CPU profile of one window of each into bench/profiles/.
 */
import { pathToFileURL } from 'node:url';
import * as Y from 'yjs';
import { createRoomId, signDeviceToken } from '../server/tokens.ts';
import { Child } from './processes.ts';
import { benchSecret, type ServerReport } from './protocol.ts';
import { median, type RelayEditor, relayEditor, sleep, until } from './yjs-bench.ts';

const roomCount = 20;
const devicesPerRoom = 3;
const keystrokeEveryMs = 10;
const windowMs = 4_000;
const windows = Number(process.env.BENCH_WINDOWS ?? 7);
const profiling = process.env.BENCH_CPU_PROF === 'store';

interface Relay {
  name: string;
  server: Child<ServerReport>;
  /** Per room: the typist first, then the devices that receive. */
  rooms: RelayEditor[][];
  samples: number[];
}

let nextUser = 1;
let nextDevice = 1;

async function startRelay(name: string, args: string[]): Promise<Relay> {
  const server = new Child<ServerReport>('server.ts', args, []);
  const { port } = await server.next('ready');
  const url = `ws://127.0.0.1:${port}`;
  const rooms: RelayEditor[][] = [];
  for (let r = 0; r < roomCount; r += 1) {
    const userId = nextUser++;
    const room = createRoomId(userId, benchSecret);
    const editors: RelayEditor[] = [];
    for (let d = 0; d < devicesPerRoom; d += 1) {
      const deviceId = nextDevice++;
      const issuedAt = Math.floor(Date.now() / 1000);
      const deviceToken = signDeviceToken(
        { userId, deviceId, issuedAt },
        benchSecret,
        'hmac-sha256',
      );
      const device = { deviceId, deviceToken };
      editors.push(await relayEditor(url, room, device, new Y.Doc(), 'notes', 1_000_000));
    }
    rooms.push(editors);
  }
  return { name, server, rooms, samples: [] };
}

async function counters(relay: Relay) {
  const report = await relay.server.ask({ kind: 'counters' }, 'counters');
  return { delivered: report.delivered, cpu: report.cpuUsageSeconds ?? report.cpuSeconds };
}

/** One window of typing in every room of `relay`: µs of relay CPU per delivered message. */
async function measureWindow(relay: Relay, profile: string | undefined): Promise<number> {
  if (profile !== undefined) await relay.server.ask({ kind: 'profile-start' }, 'profiling');
  const before = await counters(relay);
  const typists = relay.rooms.map((editors) => editors[0]!);
  const timer = setInterval(() => {
    for (const typist of typists) {
      const text = typist.doc.getText('text');
      text.insert(text.length, String.fromCharCode(97 + (text.length % 26)));
    }
  }, keystrokeEveryMs);
  await sleep(windowMs);
  clearInterval(timer);
  await Promise.all(typists.map((typist) => typist.provider.flush()));
  await until(
    () =>
      relay.rooms.every((editors) =>
        editors.every(
          (e) => e.doc.getText('text').length === editors[0]!.doc.getText('text').length,
        ),
      ),
    'every keystroke delivered',
  );
  const after = await counters(relay);
  if (profile !== undefined)
    await relay.server.ask({ kind: 'profile-stop', name: profile }, 'profiled');
  const delivered = after.delivered - before.delivered;
  return ((after.cpu - before.cpu) * 1e6) / Math.max(1, delivered);
}

async function stop(relay: Relay): Promise<void> {
  for (const editors of relay.rooms) for (const editor of editors) await editor.close();
  relay.server.send({ kind: 'close' });
  await new Promise((resolve) => relay.server.proc.once('exit', resolve));
}

export async function storeCpu(): Promise<void> {
  const relays = [
    await startRelay('store on', ['relay']),
    await startRelay('store off', ['relay', 'store-off']),
  ];
  for (let w = 0; w < windows; w += 1) {
    for (const relay of w % 2 === 0 ? relays : [...relays].reverse()) {
      const profile = profiling && w === 1 ? `relay-${relay.name.replace(' ', '-')}` : undefined;
      const perMessage = await measureWindow(relay, profile);
      if (w > 0) relay.samples.push(perMessage);
    }
  }
  for (const relay of relays) await stop(relay);
  const [on, off] = relays as [Relay, Relay];
  console.log('| relay | CPU µs per delivered message, median (windows) |');
  console.log('|---|---|');
  for (const relay of relays) {
    console.log(
      `| ${relay.name} | ${median(relay.samples).toFixed(2)} (${relay.samples.map((s) => s.toFixed(2)).join(', ')}) |`,
    );
  }
  console.log(
    `store on ÷ store off: ${(median(on.samples) / median(off.samples)).toFixed(2)}× (target ≤ 1.15×)`,
  );
}

// Alone: `npx tsx bench/store-cpu.ts`.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await storeCpu();
