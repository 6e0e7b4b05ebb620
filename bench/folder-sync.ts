/**
 * `npm run bench:folder`: what the folder sync costs per change from another device, against
 * the least any file sync must do for it, measured in the same run.
 *
 * Two FolderSync instances (the code `sync-host sync` runs) on two folders of N text files each
 * (N = 100, 1,000, 5,000; 2 KiB a file), their shared documents linked in this process (no
 * network: the relay's cost is `bench:sync`'s). Device A appends one line to one file, scans,
 * and device B applies it (reads its folder once more, merges, writes the file through a
 * temporary file). The reference is the bare write: reading that one file, writing it whole to
 * a temporary file and renaming it over, as B's disk work at the least. 200 changes per size,
 * three rounds alternating; medians of CPU time per change (B's side alone), and the ratio.
 */
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as Y from 'yjs';
import { FolderSync } from '../client/folder/folder-sync.ts';

const sizes = (process.env.BENCH_FOLDER_SIZES ?? '100,1000,5000').split(',').map(Number);
const changes = 200;
const rounds = 3;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

function cpuMicros(): number {
  const usage = process.cpuUsage();
  return usage.user + usage.system;
}

function fill(dir: string, files: number): void {
  for (let i = 0; i < files; i += 1) {
    const folder = join(dir, `d${i % 50}`);
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, `f${i}.md`), `${'line of text '.repeat(150)}\n`);
  }
}

/** CPU µs per change applied by device B through the folder sync. */
function folderSyncRound(root: string, files: number): number {
  const dirA = join(root, 'a');
  const dirB = join(root, 'b');
  mkdirSync(dirA);
  mkdirSync(dirB);
  fill(dirA, files);
  const log = () => {};
  const limits = { filesPerMinute: 1e9, bytesPerMinute: 1e12 };
  const a = new FolderSync({ dir: dirA, stateFile: join(root, 'a.log'), device: '1', log });
  const b = new FolderSync({ dir: dirB, stateFile: join(root, 'b.log'), device: '2', log, limits });
  a.scan();
  Y.applyUpdate(b.shared, Y.encodeStateAsUpdate(a.shared), 'peer');
  b.flushRemote();
  let pending: Uint8Array[] = [];
  a.shared.on('update', (update: Uint8Array, origin: unknown) => {
    if (origin !== 'peer') pending.push(update);
  });
  let spent = 0;
  for (let i = 0; i < changes; i += 1) {
    const path = join(dirA, `d${i % 50}`, `f${i % files}.md`);
    writeFileSync(path, `${readFileSync(path, 'utf8')}change ${i}\n`);
    a.scan();
    const start = cpuMicros();
    for (const update of pending) Y.applyUpdate(b.shared, update, 'peer');
    pending = [];
    b.flushRemote();
    spent += cpuMicros() - start;
  }
  const expected = readFileSync(join(dirA, 'd0', 'f0.md'), 'utf8');
  if (readFileSync(join(dirB, 'd0', 'f0.md'), 'utf8') !== expected)
    throw new Error('B is behind A');
  a.close();
  b.close();
  return spent / changes;
}

/** CPU µs per change of the bare write: read the file, write a temporary file, rename it over. */
function bareWriteRound(root: string, files: number): number {
  const dir = join(root, 'bare');
  mkdirSync(dir);
  fill(dir, files);
  const start = cpuMicros();
  for (let i = 0; i < changes; i += 1) {
    const path = join(dir, `d${i % 50}`, `f${i % files}.md`);
    const content = `${readFileSync(path, 'utf8')}change ${i}\n`;
    writeFileSync(`${path}.tmp`, content);
    renameSync(`${path}.tmp`, path);
  }
  return (cpuMicros() - start) / changes;
}

console.log(
  `folder sync: CPU per change from another device (device B's side), ${changes} changes, medians of ${rounds} rounds`,
);
console.log('| files in the folder | folder sync (µs) | bare write (µs) | ratio |');
console.log('|---:|---:|---:|---:|');
for (const files of sizes) {
  const synced: number[] = [];
  const bare: number[] = [];
  for (let round = 0; round < rounds; round += 1) {
    for (const [list, work] of [
      [bare, bareWriteRound],
      [synced, folderSyncRound],
    ] as const) {
      const root = mkdtempSync(join(tmpdir(), 'bench-folder-'));
      try {
        list.push(work(root, files));
      } finally {
        rmSync(root, { recursive: true, force: true });
      }
    }
  }
  const s = median(synced);
  const b = median(bare);
  console.log(`| ${files} | ${s.toFixed(0)} | ${b.toFixed(0)} | ${(s / b).toFixed(1)}× |`);
}
