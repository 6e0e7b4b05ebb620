/**
 * The files of the folder section of `npm run bench:sync` (bench/sync-folders.ts), the wait
 * until another folder holds them, and the bytes on the TCP sockets of given processes.
 */
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  closeSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  statSync,
  writeSync,
} from 'node:fs';
import { join, relative } from 'node:path';

/** What a folder must hold: relative path → size and SHA-256 (hex). */
export type Expected = Map<string, { size: number; sha256: string }>;

/**
 * `count` text files of 1 to 8 KiB (random printable lines, different every call: nothing to
 * deduplicate between rounds) in 20 subfolders of `dir`.
 */
export function writeSmallFiles(dir: string, count: number): Expected {
  const expected: Expected = new Map();
  for (let i = 0; i < count; i += 1) {
    const path = `notes-${i % 20}/note-${i}.md`;
    const lines = Math.ceil(((1 + (i % 8)) * 1024) / 77);
    const text = Array.from({ length: lines }, () => randomBytes(57).toString('base64')).join('\n');
    const data = Buffer.from(`${text}\n`);
    mkdirSync(join(dir, `notes-${i % 20}`), { recursive: true });
    writeWhole(join(dir, path), [data]);
    expected.set(path, { size: data.length, sha256: sha256(data) });
  }
  return expected;
}

/**
 * `count` files as a folder of notes holds them: 9 in 10 text notes of 1 to 6 KiB (random
 * printable lines), 1 in 10 binaries of 20 to 200 KiB of random bytes (incompressible), 50 to a
 * folder, in a tree one to three folders deep (`area-3/`, `area-3/topic-1/`,
 * `area-3/topic-1/part-2/`). Sizes are the same every call, contents new: nothing to deduplicate
 * between rounds.
 */
export function writeMixedFiles(dir: string, count: number): Expected {
  const expected: Expected = new Map();
  const made = new Set<string>();
  for (let i = 0; i < count; i += 1) {
    const folder = nestedFolder(Math.floor(i / 50));
    const binary = i % 10 === 9;
    const data = binary
      ? randomBytes(spread(i, 20 * 1_024, 200 * 1_024))
      : noteText(spread(i, 1_024, 6 * 1_024));
    const path = `${folder}/${binary ? `attachment-${i}.bin` : `note-${i}.md`}`;
    if (!made.has(folder)) {
      mkdirSync(join(dir, folder), { recursive: true });
      made.add(folder);
    }
    writeWhole(join(dir, path), [data]);
    expected.set(path, { size: data.length, sha256: sha256(data) });
  }
  return expected;
}

/** The folder of leaf number `leaf`: one level for the first 10, two up to 100, then three. */
function nestedFolder(leaf: number): string {
  const parts = [`area-${leaf % 10}`];
  if (leaf >= 10) parts.push(`topic-${Math.floor(leaf / 10) % 10}`);
  if (leaf >= 100) parts.push(`part-${Math.floor(leaf / 100)}`);
  return parts.join('/');
}

/** A size from `min` to `max` for file `i`, scattered evenly (a multiplicative hash of `i`). */
function spread(i: number, min: number, max: number): number {
  return min + ((i * 2_654_435_761) % (max - min + 1));
}

/** `bytes` of random printable text in lines of 76 characters, ending with a newline. */
function noteText(bytes: number): Buffer {
  const text = randomBytes(Math.ceil((bytes * 3) / 4))
    .toString('base64')
    .replace(/.{76}/g, '$&\n');
  return Buffer.from(`${text.slice(0, bytes - 1)}\n`);
}

/** One file of `bytes` random bytes (incompressible), written in 1 MiB pieces. */
export function writeLargeFile(dir: string, name: string, bytes: number): Expected {
  const hash = createHash('sha256');
  const pieces: Buffer[] = [];
  for (let left = bytes; left > 0; left -= 1_048_576) {
    const piece = randomBytes(Math.min(left, 1_048_576));
    hash.update(piece);
    pieces.push(piece);
  }
  writeWhole(join(dir, name), pieces);
  return new Map([[name, { size: bytes, sha256: hash.digest('hex') }]]);
}

function writeWhole(path: string, pieces: Buffer[]): void {
  const fd = openSync(path, 'w');
  try {
    for (const piece of pieces) writeSync(fd, piece);
  } finally {
    closeSync(fd);
  }
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Sizes of the regular files under `dir` by relative path, dot files and dot folders left out. */
function sizes(dir: string): Map<string, number> {
  const found = new Map<string, number>();
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = relative(dir, join(entry.parentPath, entry.name));
    if (path.split('/').some((part) => part.startsWith('.'))) continue;
    try {
      found.set(path, statSync(join(dir, path)).size);
    } catch {
      // Renamed or removed between the listing and the stat: the next poll sees it.
    }
  }
  return found;
}

/**
 * The expected files `dir` does not hold yet: each of `waiting` found at its size is read and
 * hashed, and leaves `waiting` when its content is right.
 */
function settle(dir: string, waiting: Expected): void {
  for (const [path, { size, sha256: digest }] of waiting) {
    let data: Buffer;
    try {
      if (statSync(join(dir, path)).size !== size) continue;
      data = readFileSync(join(dir, path));
    } catch {
      continue;
    }
    if (sha256(data) === digest) waiting.delete(path);
  }
}

/**
 * Waits until `dir` holds every expected file byte for byte; resolves with the milliseconds
 * from `startedMs` to the poll that found the last ones. A poll looks only at the files not
 * found yet (a stat each, then a read and a hash once the size is right), and the next one
 * comes after twice as long as this one took, 20 ms at least: looking at 100,000 files every
 * 20 ms took a whole core of this two-core machine from the systems measured.
 */
export async function waitForFiles(
  dir: string,
  expected: Expected,
  startedMs: number,
  deadlineMs: number,
): Promise<number> {
  const waiting: Expected = new Map(expected);
  for (;;) {
    const polled = performance.now();
    settle(dir, waiting);
    if (waiting.size === 0) return polled - startedMs;
    const now = performance.now();
    if (now - startedMs > deadlineMs) {
      throw new Error(
        `${dir}: ${waiting.size} of ${expected.size} files not there within ${deadlineMs} ms (${sizes(dir).size} files present)`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, Math.max(20, 2 * (now - polled))));
  }
}

/** Bytes sent and received on the TCP sockets of one process. */
export interface SocketBytes {
  sent: number;
  received: number;
}

/**
 * The CPU time (ms) `pid` and its threads used so far, from /proc/<pid>/stat (utime and stime, in
 * clock ticks of 10 ms): user and system time, or only one of them with `BENCH_CPU_PART=user` or
 * `sys`; 0 when it is gone.
 */
export function cpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const [user, sys] = [Number(fields[11]), Number(fields[12])];
    const part = process.env.BENCH_CPU_PART;
    return (part === 'user' ? user : part === 'sys' ? sys : user + sys) * 10;
  } catch {
    return 0;
  }
}

/** `pid`'s parent process, or undefined when it is gone. */
function parentOf(pid: number): number | undefined {
  try {
    // /proc/<pid>/stat: "pid (name) state ppid …"; the name may hold spaces and parentheses.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}

/** The processes whose parent is `pid`. */
export function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((child) => parentOf(child) === pid);
}

/** The one of `roots` that is `pid` or one of its ancestors. */
function rootOf(pid: number, roots: Set<number>): number | undefined {
  for (let at: number | undefined = pid; at !== undefined && at > 1; at = parentOf(at)) {
    if (roots.has(at)) return at;
  }
  return undefined;
}

/**
 * The payload bytes (TCP, without headers) each process in `pids` (with its descendants: Syncthing
 * runs its work in a child of the process started) sent and received on its established sockets
 * from or to any of `ports`, as the kernel counts them (`ss -tinp`).
 */
export function socketBytes(pids: number[], ports: number[]): Map<number, SocketBytes> {
  const filter = ports.map((port) => `sport = :${port} or dport = :${port}`).join(' or ');
  const out = execFileSync('ss', ['-tinpH', 'state', 'established', `( ${filter} )`], {
    encoding: 'utf8',
  });
  const totals = new Map<number, SocketBytes>(pids.map((pid) => [pid, { sent: 0, received: 0 }]));
  const roots = new Set(pids);
  let owner: SocketBytes | undefined;
  for (const line of out.split('\n')) {
    if (!/^\s/.test(line)) {
      const pid = rootOf(Number(/pid=(\d+)/.exec(line)?.[1]), roots);
      owner = pid === undefined ? undefined : totals.get(pid);
      continue;
    }
    if (owner === undefined) continue;
    owner.sent += Number(/bytes_sent:(\d+)/.exec(line)?.[1] ?? 0);
    owner.received += Number(/bytes_received:(\d+)/.exec(line)?.[1] ?? 0);
  }
  return totals;
}

/** `after` minus `before`, per process. */
export function bytesBetween(
  before: Map<number, SocketBytes>,
  after: Map<number, SocketBytes>,
): Map<number, SocketBytes> {
  const spent = new Map<number, SocketBytes>();
  for (const [pid, end] of after) {
    const start = before.get(pid) ?? { sent: 0, received: 0 };
    spent.set(pid, { sent: end.sent - start.sent, received: end.received - start.received });
  }
  return spent;
}
