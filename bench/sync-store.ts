/**
 * `npm run bench:sync-store` (and the second half of `npm run bench:sync`): the host's document
 * store against Hocuspocus with SQLite persistence, both in this process on loopback.
 *
 * - cold catch-up from the host alone: a device writes the 1 MiB document of 10,000 edits and
 *   leaves; a device that never held it joins with nobody else online and catches up from what
 *   the host kept. Time until its text equals the source's, and the bytes its socket received
 *   and sent.
 * - bytes kept after 10,000 keystrokes: one device types 10,000 characters, one per
 *   transaction, at a human 5 per second on the host's clock (2,000 s: four history steps);
 *   then the clock passes the last step and the store's sweep (compaction) runs. The entries'
 *   data bytes and the bytes counted against the bounds, against the length of Hocuspocus's row.
 *
 * Hocuspocus persists with `@hocuspocus/extension-database` over better-sqlite3, with the schema
 * and queries of `@hocuspocus/extension-sqlite` (one row per document holding its whole encoded
 * state): extension-sqlite itself needs the `sqlite3` native module, which npm builds here only
 * from source. Rounds alternate between the two systems; medians. Then bench/store-cpu.ts.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Database } from '@hocuspocus/extension-database';
import { Server } from '@hocuspocus/server';
import type BetterSqlite3 from 'better-sqlite3';
import * as Y from 'yjs';
import { requireBetterSqlite3 } from '../server/db/better-sqlite3.ts';
import { registerProject, startTestHost, type TestHost } from '../test/helpers/host.ts';
import { storeCpu } from './store-cpu.ts';
import {
  bigDocument,
  copyOf,
  type Editor,
  hocuspocusEditor,
  median,
  type RelayDevice,
  relayEditor,
  until,
} from './yjs-bench.ts';

const keystrokes = 10_000;
/**
 * Host-clock time between two keystrokes: a person typing 5 characters a second (2,000 s, four
 * history steps of 10 minutes), or 50 a second (200 s, within one step: no history kept).
 */
const paces = [200, 20];
const rounds = Number(process.env.BENCH_ROUNDS ?? 5);
/** Frames per second of the relay's and the clients' token buckets: sized never to hold back. */
const unlimited = 1_000_000;

/** What a server keeps of one document: its rows, their data, and the snapshots among them. */
interface Kept {
  dataBytes: number;
  rows: number;
  /** Counted against the store's bounds (each entry's data plus 64 and its names). */
  countedBytes: number;
  snapshots: number;
  snapshotBytes: number;
}

/** What one system does in one round of each measure. */
interface StoreSystem {
  name: string;
  /** Stores `source` through one device, which leaves; another device catches up. */
  coldCatchUp(
    round: number,
    source: Y.Doc,
  ): Promise<{ ms: number; received: number; sent: number }>;
  /** One device types; what the server keeps of the document afterwards. */
  typing(round: number, keystrokeMs: number): Promise<Kept>;
  close(): Promise<void>;
}

/**
 * Types `keystrokes` characters, one transaction each; `between` runs after each (it waits,
 * as the time between two keystrokes of a person does).
 */
async function type(editor: Editor, between: () => Promise<void>): Promise<void> {
  const text = editor.doc.getText('text');
  for (let i = 0; i < keystrokes; i += 1) {
    text.insert(i, String.fromCharCode(97 + (i % 26)));
    await between();
  }
}

async function relayStoreSystem(): Promise<StoreSystem> {
  let clockOffsetMs = 0;
  const th: TestHost = await startTestHost({
    ui: false,
    // Sized never to drop: the typist sends two frames (update and append) per keystroke.
    relay: [`rate.perSecond=${unlimited}`, `rate.burst=${unlimited}`],
    now: () => Date.now() + clockOffsetMs,
  });
  const device = (name: string): Promise<RelayDevice> => th.signIn('bench@example.org', name);
  const writer = await device('writer');
  const { roomId } = await registerProject(th.base, writer.deviceToken, 'bench');
  const store: BetterSqlite3.Database = new (requireBetterSqlite3())(
    join(th.dir, 'data', 'store.db'),
    { readonly: true },
  );
  const kept = store.prepare<[string], Kept>(
    `SELECT coalesce(sum(length(e.data)), 0) AS dataBytes, count(e.id) AS rows,
       d.bytes AS countedBytes, count(e.covers) AS snapshots,
       coalesce(sum(CASE WHEN e.covers IS NOT NULL THEN length(e.data) END), 0) AS snapshotBytes
     FROM documents d LEFT JOIN entries e ON e.document = d.id WHERE d.doc = ? GROUP BY d.id`,
  );
  const snapshots = store.prepare<[string], { pos: number }>(
    'SELECT e.pos FROM entries e JOIN documents d ON e.document = d.id WHERE d.doc = ? AND e.covers IS NOT NULL',
  );
  return {
    name: 'sync-host document store',
    async coldCatchUp(round, source) {
      const name = `cold-${round}`;
      const holder = await relayEditor(
        th.relayUrl,
        roomId,
        writer,
        copyOf(source),
        name,
        unlimited,
      );
      // The writer stays until the host holds its snapshot, as one typing that much would have.
      await until(() => snapshots.get(name) !== undefined, 'snapshot stored');
      await holder.provider.flush();
      await holder.close();
      // A device that never joined: the relay buffered nothing for it, the host's store is all.
      const reader = await device(`reader-${round}`);
      const expected = source.getText('text').length;
      const started = performance.now();
      const cold = await relayEditor(th.relayUrl, roomId, reader, new Y.Doc(), name, unlimited);
      await until(() => cold.doc.getText('text').length === expected, 'cold device caught up');
      const ms = performance.now() - started;
      await cold.close();
      return { ms, received: cold.bytes.received, sent: cold.bytes.sent };
    },
    async typing(round, keystrokeMs) {
      const name = `keys-${round}-${keystrokeMs}`;
      // At the start of a history step, so that the pace alone decides how many it spans.
      const stepMs = 10 * 60_000;
      clockOffsetMs += stepMs - ((Date.now() + clockOffsetMs) % stepMs) + 1_000;
      const typist = await relayEditor(th.relayUrl, roomId, writer, new Y.Doc(), name, unlimited);
      // Each keystroke stored before the next, as at a person's pace (the round trip is ~1 ms).
      await type(typist, async () => {
        clockOffsetMs += keystrokeMs;
        await typist.provider.flush();
      });
      await typist.provider.flush();
      await typist.close();
      // The last history step ends; the sweep compacts what the snapshots stand for.
      clockOffsetMs += 11 * 60_000;
      await th.host.relay?.sweepStore();
      const row = kept.get(name);
      if (row === undefined) throw new Error(`the host keeps no document ${name}`);
      return row;
    },
    async close() {
      store.close();
      await th.close();
    },
  };
}

/** Hocuspocus persisting as `@hocuspocus/extension-sqlite` does, in a temporary file. */
async function hocuspocusSqliteSystem(): Promise<StoreSystem> {
  const dir = mkdtempSync(join(tmpdir(), 'hocuspocus-sqlite-'));
  const db: BetterSqlite3.Database = new (requireBetterSqlite3())(join(dir, 'hocuspocus.sqlite'));
  // extension-sqlite's schema and queries.
  db.exec(`CREATE TABLE IF NOT EXISTS "documents" (
  "name" varchar(255) NOT NULL,
  "data" blob NOT NULL,
  UNIQUE(name)
)`);
  const select = db.prepare<{ name: string }, { data: Buffer }>(
    'SELECT data FROM "documents" WHERE name = $name ORDER BY rowid DESC',
  );
  const upsert = db.prepare(
    'INSERT INTO "documents" ("name", "data") VALUES ($name, $data) ON CONFLICT(name) DO UPDATE SET data = $data',
  );
  const server = new Server({
    port: 0,
    quiet: true,
    extensions: [
      new Database({
        fetch: async ({ documentName }) => select.get({ name: documentName })?.data ?? null,
        store: async ({ documentName, state }) => {
          upsert.run({ name: documentName, data: state });
        },
      }),
    ],
  });
  await server.listen(0);
  const url = `ws://127.0.0.1:${server.address.port}`;
  /** Closes an editor and waits until the server stored the document and let it go. */
  const leave = async (editor: Editor) => {
    await editor.close();
    await until(() => server.hocuspocus.getDocumentsCount() === 0, 'document unloaded');
  };
  return {
    name: 'Hocuspocus + SQLite',
    async coldCatchUp(round, source) {
      const name = `cold-${round}`;
      await leave(await hocuspocusEditor(url, copyOf(source), name));
      const expected = source.getText('text').length;
      const started = performance.now();
      const cold = await hocuspocusEditor(url, new Y.Doc(), name);
      await until(() => cold.doc.getText('text').length === expected, 'cold device caught up');
      const ms = performance.now() - started;
      await leave(cold);
      return { ms, received: cold.bytes.received, sent: cold.bytes.sent };
    },
    async typing(round, keystrokeMs) {
      const name = `keys-${round}-${keystrokeMs}`;
      const typist = await hocuspocusEditor(url, new Y.Doc(), name);
      let typed = 0;
      await type(typist, async () => {
        if (++typed % 50 === 0) await new Promise((resolve) => setTimeout(resolve, 1));
      });
      await until(() => typist.doc.getText('text').length === keystrokes, 'typed');
      await leave(typist);
      const row = select.get({ name });
      if (row === undefined) throw new Error(`Hocuspocus stored no document ${name}`);
      const bytes = row.data.length;
      return { dataBytes: bytes, countedBytes: bytes, rows: 1, snapshots: 1, snapshotBytes: bytes };
    },
    async close() {
      await server.destroy();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function main(): Promise<void> {
  const source = bigDocument();
  const size = Y.encodeStateAsUpdate(source).length;
  console.log(
    `document: ${source.getText('text').length} characters, state ${(size / 1_048_576).toFixed(2)} MiB, 10,000 edits; ${rounds} rounds`,
  );
  const systems = [await relayStoreSystem(), await hocuspocusSqliteSystem()];
  const results = new Map(
    systems.map((s) => [s.name, { cold: [] as ColdResult[], kept: paces.map(() => [] as Kept[]) }]),
  );
  for (let round = 0; round < rounds; round += 1) {
    for (const system of round % 2 === 0 ? systems : [...systems].reverse()) {
      const entry = results.get(system.name)!;
      entry.cold.push(await system.coldCatchUp(round, source));
      for (const [i, pace] of paces.entries())
        entry.kept[i]!.push(await system.typing(round, pace));
    }
  }
  for (const system of systems) await system.close();
  console.log(
    '| system | cold catch-up ms (runs) | cold bytes received / sent | kept after 10,000 keystrokes at 5/s: data bytes (rows), counted; snapshots among them | the same at 50/s (one history step) |',
  );
  console.log('|---|---|---|---|---|');
  for (const [name, { cold, kept }] of results) {
    const ms = cold.map((c) => c.ms);
    console.log(
      `| ${name} | ${median(ms).toFixed(0)} (${ms.map((m) => m.toFixed(0)).join(', ')}) | ${median(cold.map((c) => c.received))} / ${median(cold.map((c) => c.sent))} | ${kept.map(keptCell).join(' | ')} |`,
    );
  }
  await storeCpu();
}

type ColdResult = Awaited<ReturnType<StoreSystem['coldCatchUp']>>;

const keptCell = (kept: Kept[]) =>
  `${median(kept.map((k) => k.dataBytes))} (${median(kept.map((k) => k.rows))}), ${median(kept.map((k) => k.countedBytes))}; snapshots ${median(kept.map((k) => k.snapshotBytes))} (${median(kept.map((k) => k.snapshots))})`;

await main();
