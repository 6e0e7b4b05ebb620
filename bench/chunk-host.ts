/**
 * `npx tsx bench/chunk-host.ts`: the host's cost per 256 KiB chunk, step by step, on 100 MiB of
 * random chunks in a fresh store.db: the frame parsed, checked and decoded from its bytes (whole,
 * and with its trailing data split off), the
 * SHA-256 of the id, the store's put (committed per event-loop turn) and get, and the `chunk`
 * answer's encoding. Medians of 3 runs, ms for the 400 chunks.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chunkAnswer } from '../server/relay/chunk-frames.ts';
import { dataOf, parseFrame, parseFrameBytes } from '../server/relay/messages.ts';
import { openSqliteStore } from '../server/store/sqlite-store.ts';

const chunkCount = Number(process.env.BENCH_CHUNKS ?? 400);
const perTurn = Number(process.env.BENCH_PUTS_PER_TURN ?? 8);
const room = 'u1.r1';
const datas = Array.from({ length: chunkCount }, () => randomBytes(262_144));
const ids = datas.map((d) => `s${createHash('sha256').update(d).digest('base64url')}`);
// as the client spells them: `data` last
const frames = datas.map((d, i) =>
  Buffer.from(
    JSON.stringify({ type: 'chunk-put', ref: i + 1, id: ids[i], data: d.toString('base64') }),
  ),
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
  const result: Record<string, number> = {};
  // Each frame as it comes off the socket (bytes), parsed, checked and decoded the host's way:
  // whole (UTF-8 decode, JSON.parse, schema), and split (the trailing data on its own).
  const parsedWhole = (frame: Buffer) => parseFrame(frame.toString('utf8'));
  let decoded: Buffer[] = [];
  let split = 0;
  for (const [step, parse] of [
    ['parseWhole', parsedWhole],
    ['parseSplit', parseFrameBytes],
  ] as const) {
    decoded = [];
    result[step] = timed(() => {
      for (const bytes of frames) {
        const frame = parse(bytes);
        if (frame.type !== 'chunk-put') throw new Error(`not a chunk-put: ${frame.type}`);
        if (frame.decoded !== undefined) split += 1;
        // the bytes decoded by the split parse, or by the schema's check of the whole frame
        decoded.push(dataOf(frame));
      }
    });
  }
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
  if (split !== chunkCount) throw new Error(`${split} of ${chunkCount} frames were split`);
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
