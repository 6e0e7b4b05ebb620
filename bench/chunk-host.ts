/**
 * `npx tsx bench/chunk-host.ts`: the host's cost per 256 KiB chunk, step by step, on 100 MiB of
 * random chunks in a fresh store.db: the frame's JSON, its schema check with the base64 decode, the
 * SHA-256 of the id, the store's put (committed per event-loop turn) and get, and the `chunk`
 * answer's encoding. Medians of 3 runs, ms for the 400 chunks.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { takeCheckedBase64 } from '../protocol/base64.ts';
import { chunkPutSchema } from '../protocol/relay-frames.ts';
import { chunkAnswer } from '../server/relay/chunk-frames.ts';
import { openSqliteStore } from '../server/store/sqlite-store.ts';

const chunkCount = Number(process.env.BENCH_CHUNKS ?? 400);
const perTurn = Number(process.env.BENCH_PUTS_PER_TURN ?? 8);
const room = 'u1.r1';
const datas = Array.from({ length: chunkCount }, () => randomBytes(262_144));
const ids = datas.map((d) => `s${createHash('sha256').update(d).digest('base64url')}`);
const texts = datas.map((d, i) =>
  JSON.stringify({ type: 'chunk-put', ref: i + 1, id: ids[i], data: d.toString('base64') }),
);

function timed(work: () => void): number {
  const start = performance.now();
  work();
  return performance.now() - start;
}

async function timedAsync(work: () => Promise<void>): Promise<number> {
  const start = performance.now();
  await work();
  return performance.now() - start;
}

async function run(): Promise<Record<string, number>> {
  const dir = mkdtempSync(join(tmpdir(), 'chunk-host-'));
  const store = openSqliteStore({
    path: join(dir, 'store.db'),
    bounds: { maxBytes: 10 * 2 ** 30, userMaxBytes: 10 * 2 ** 30 },
    history: { keepMs: 86_400_000, stepMs: 60_000 },
  } as Parameters<typeof openSqliteStore>[0]);
  const parsed: Array<{ id: string; data: string }> = [];
  const result: Record<string, number> = {};
  result.jsonParse = timed(() => {
    for (const text of texts) parsed.push(JSON.parse(text));
  });
  const decoded: Buffer[] = [];
  let hits = 0;
  result.checkDecode = timed(() => {
    for (const frame of parsed) {
      chunkPutSchema.parse(frame);
      const checked = takeCheckedBase64(frame.data);
      if (checked !== undefined) hits += 1;
      const bytes = checked ?? Buffer.from(frame.data, 'base64');
      decoded.push(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    }
  });
  result.sha256 = timed(() => {
    for (const data of decoded) createHash('sha256').update(data).digest('base64url');
  });
  result.put = await timedAsync(async () => {
    for (let i = 0; i < chunkCount; i += perTurn) {
      const turn = decoded
        .slice(i, i + perTurn)
        .map((data, j) => store.chunks.put({ room, kc: '', id: ids[i + j] as string, data }));
      await Promise.all(turn);
    }
  });
  const got: Buffer[] = [];
  result.get = await timedAsync(async () => {
    for (const id of ids) got.push((await store.chunks.get(room, '', id)) as Buffer);
  });
  result.answer = timed(() => {
    got.forEach((data, i) => {
      chunkAnswer(i, ids[i] as string, data);
    });
  });
  if (hits !== chunkCount) throw new Error(`the schema's decode was taken ${hits} times`);
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  return result;
}

const runs: Array<Record<string, number>> = [];
for (let i = 0; i < 3; i++) runs.push(await run());
const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
for (const step of Object.keys(runs[0] as object)) {
  const ms = median(runs.map((r) => r[step] as number));
  process.stdout.write(`${step.padEnd(12)} ${ms.toFixed(0).padStart(6)} ms\n`);
}
