/**
 * Fixed blocks against content-defined chunking (FastCDC) for the file chunks of the folder
 * sync: on a 100 MiB file of random bytes, 1 MiB changed in the middle, in place and inserted,
 * how many chunks (and bytes) a device has to send again, and how long cutting and hashing
 * 100 MiB takes. `npx tsx bench/chunking.ts` (`--mib=<n>` for another size).
 *
 * The FastCDC cutter here is the algorithm of Xia et al. (USENIX ATC 2016: gear hash, normalized
 * chunking with a harder mask before the average size and an easier one after), written for
 * this measurement only; no FastCDC package is in the project's dependencies.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { plainChunkId } from '../client/chunks/chunk-id.ts';
import { maxChunkBytes } from '../client/chunks/chunk-transfer.ts';
import { fileChunks } from '../client/chunks/file-chunks.ts';

const mib = 1_048_576;
const sizeMib = Number(process.argv.find((a) => a.startsWith('--mib='))?.slice(6) ?? 100);

/** Cuts `data` into chunks: their lengths, in order. */
type Chunker = (data: Uint8Array) => number[];

const fixed =
  (bytes: number): Chunker =>
  (data) => {
    const lengths: number[] = [];
    for (let start = 0; start < data.length; start += bytes) {
      lengths.push(Math.min(bytes, data.length - start));
    }
    return lengths;
  };

/** 256 pseudo-random 32-bit values (a fixed seed: the same cuts on every run and device). */
function gearTable(): Uint32Array {
  const table = new Uint32Array(256);
  let x = 0x9e3779b9;
  for (let i = 0; i < 256; i += 1) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    table[i] = x >>> 0;
  }
  return table;
}

/** FastCDC with sizes min/avg/max; masks on the hash's high bits (its last 32 bytes). */
function fastCdc(minBytes: number, avgBytes: number, maxBytes: number): Chunker {
  const gear = gearTable();
  const bits = Math.log2(avgBytes);
  const maskHard = (0xffffffff << (32 - (bits + 2))) >>> 0;
  const maskEasy = (0xffffffff << (32 - (bits - 2))) >>> 0;
  const cut = (data: Uint8Array, start: number): number => {
    const left = data.length - start;
    if (left <= minBytes) return left;
    const normal = Math.min(avgBytes, left);
    const limit = Math.min(maxBytes, left);
    let hash = 0;
    let i = minBytes;
    for (; i < normal; i += 1) {
      hash = ((hash << 1) + gear[data[start + i]!]!) >>> 0;
      if ((hash & maskHard) === 0) return i + 1;
    }
    for (; i < limit; i += 1) {
      hash = ((hash << 1) + gear[data[start + i]!]!) >>> 0;
      if ((hash & maskEasy) === 0) return i + 1;
    }
    return limit;
  };
  return (data) => {
    const lengths: number[] = [];
    for (let start = 0; start < data.length; ) {
      const length = cut(data, start);
      lengths.push(length);
      start += length;
    }
    return lengths;
  };
}

/** Chunk ids (SHA-256) and sizes of `data` as `chunker` cuts it. */
function chunksOf(chunker: Chunker, data: Uint8Array): Array<{ id: string; size: number }> {
  let start = 0;
  return chunker(data).map((size) => {
    const id = createHash('sha256')
      .update(data.subarray(start, start + size))
      .digest('base64url');
    start += size;
    return { id, size };
  });
}

/** Chunks and bytes of `changed` that `original`'s chunks do not hold. */
function toSend(chunker: Chunker, original: Uint8Array, changed: Uint8Array) {
  const held = new Set(chunksOf(chunker, original).map((c) => c.id));
  const fresh = chunksOf(chunker, changed).filter((c) => !held.has(c.id));
  return { chunks: fresh.length, bytes: fresh.reduce((sum, c) => sum + c.size, 0) };
}

function seconds(run: () => void): number {
  const start = process.hrtime.bigint();
  run();
  return Number(process.hrtime.bigint() - start) / 1e9;
}

const original = randomBytes(sizeMib * mib);
/** Where the change goes: the middle, off any block boundary (as an edit would be). */
const middle = Math.floor(original.length / 2) + 12_345;
const inPlace = Buffer.from(original);
randomBytes(mib).copy(inPlace, middle);
/** Bytes inserted at `middle`: 1 MiB (a whole number of fixed blocks) or 1,000,000 (not). */
const insertion = (bytes: number) =>
  Buffer.concat([original.subarray(0, middle), randomBytes(bytes), original.subarray(middle)]);
const changes: Array<[string, Buffer]> = [
  ['1 MiB overwritten', inPlace],
  ['1 MiB inserted', insertion(mib)],
  ['1,000,000 bytes inserted', insertion(1_000_000)],
];

const chunkers: Array<[string, Chunker]> = [
  [`fixed ${maxChunkBytes / 1024} KiB`, fixed(maxChunkBytes)],
  ['fixed 128 KiB', fixed(128 * 1024)],
  ['FastCDC 64/128/256 KiB', fastCdc(64 * 1024, 128 * 1024, maxChunkBytes)],
];

const mibOf = (bytes: number) => (bytes / mib).toFixed(2);
console.log(`# ${sizeMib} MiB of random bytes, changed at byte ${middle}\n`);
console.log(
  `| chunking | ${changes.map(([what]) => `${what}: chunks / MiB to send`).join(' | ')} | chunks of the file | cut + SHA-256 of the file, s |`,
);
console.log(`|---|${changes.map(() => '---|').join('')}---|---|`);
chunksOf(chunkers[0]![1], original); // warm-up
for (const [name, chunker] of chunkers) {
  const sends = changes.map(([, changed]) => toSend(chunker, original, changed));
  let count = 0;
  const time = Math.min(
    ...[0, 1, 2].map(() => seconds(() => (count = chunksOf(chunker, original).length))),
  );
  const cells = sends.map((s) => `${s.chunks} / ${mibOf(s.bytes)}`).join(' | ');
  console.log(`| ${name} | ${cells} | ${count} | ${time.toFixed(2)} |`);
}

// The product's path: fileChunks from disk and WebCrypto ids, as uploadFile reads a file.
const dir = mkdtempSync(join(tmpdir(), 'bench-chunking-'));
try {
  const path = join(dir, 'file.bin');
  writeFileSync(path, original);
  const start = process.hrtime.bigint();
  let chunks = 0;
  for await (const chunk of fileChunks(path, maxChunkBytes)) {
    await plainChunkId(chunk);
    chunks += 1;
  }
  const took = Number(process.hrtime.bigint() - start) / 1e9;
  console.log(
    `\nfileChunks + WebCrypto ids (uploadFile's reading), from disk: ${chunks} chunks in ${took.toFixed(2)} s`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
