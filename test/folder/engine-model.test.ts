import { posix } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
// Before any module that loads yjs: lib0 keeps the random source it finds when it loads.
import { seedOf, seedRandom } from '../helpers/seeded-random.ts';
import {
  doubledTokens,
  Ledger,
  lostTokens,
  type ModelFiles,
  names,
  type Op,
  op,
  perform,
} from './folder-model.ts';
import { MemoryDevice, MemoryRoom } from './memory-devices.ts';
import { MemoryFs } from './memory-fs.ts';

/**
 * The folder sync's model (folder-model.ts) over the engine alone: three FolderSync instances on
 * one in-memory file system, their folder documents exchanged through an in-memory room (the
 * relay and the host's store as a Y.Doc: a device that joins gets everything, an update reaches
 * the others when the network delivers it, at the model's pauses). No host, no disk: 600 runs
 * (about 25,000 steps) take a few seconds, ten times the runs of the model over the real host in
 * a tenth of its time; `ENGINE_MODEL_RUNS=20000` took about two minutes here and passed. The
 * steps are the same, without files kept as chunks (they need the host's chunk store). After
 * each run, once every device is back and all is delivered: every folder holds the same files
 * (with the same modification times and permission bits: a step here also changes a file's mode
 * alone), every line written is in one of them unless a device removed it, and no line is twice
 * in one file (20,000 runs with this check passed here in about four minutes).
 *
 * A run is the same every time: its entry ids and Yjs client ids come from a seed made of its
 * steps, its times from the in-memory file system's clock. A failure found with
 * `ENGINE_MODEL_SEED` and `ENGINE_MODEL_PATH` replays exactly, and `ENGINE_MODEL_SHRINK=1`
 * shrinks it to the fewest steps that still fail.
 */

const runs = Number(process.env.ENGINE_MODEL_RUNS ?? 600);

function memoryFiles(fs: MemoryFs): ModelFiles {
  return {
    read: (path) => fs.textAt(path),
    write(path, content) {
      fs.mkdir(posix.dirname(path), { recursive: true });
      fs.writeFile(path, content);
    },
    unlink: (path) => fs.unlink(path),
    rename(from, to) {
      fs.mkdir(posix.dirname(to), { recursive: true });
      fs.rename(from, to);
    },
  };
}

/**
 * A folder's synced files (no dot files), as pairs of the path and the text with the time and
 * mode: `__proto__` is a name like any other.
 */
function listing(fs: MemoryFs, dir: string): [string, string][] {
  return fs
    .tree(dir)
    .filter(([path]) => !path.split('/').some((part) => part.startsWith('.')))
    .map(([path, text]) => {
      const stats = fs.lstat(posix.join(dir, path));
      return [path, `${text}@${stats.mtimeMs} ${(stats.mode & 0o777).toString(8)}`];
    });
}

/** A step of this model besides the shared ones: a device changes a file's mode alone. */
type ModeOp = { kind: 'mode'; device: number; file: number; mode: number };
const modeOp: fc.Arbitrary<ModeOp> = fc.record({
  kind: fc.constant('mode' as const),
  device: fc.integer({ min: 0, max: 2 }),
  file: fc.integer({ min: 0, max: names.length - 1 }),
  mode: fc.constantFrom(0o644, 0o755, 0o600),
});

/** The tokens of a text with its time and mode (`listing`) as the shared checks take it. */
function textsOf(agreed: [string, string][]): Record<string, string> {
  return Object.fromEntries(
    agreed.map(([path, shown]) => [path, shown.slice(0, shown.lastIndexOf('@'))]),
  );
}

async function run(ops: (Op | ModeOp)[]): Promise<void> {
  // The same steps make the same ids and times: a failing run replays, and shrinks, exactly.
  seedRandom(seedOf(ops));
  try {
    await runSeeded(ops);
  } finally {
    seedRandom(undefined);
  }
}

async function runSeeded(ops: (Op | ModeOp)[]): Promise<void> {
  const fs = new MemoryFs();
  const room = new MemoryRoom();
  const devices = [0, 1, 2].map(
    (i) =>
      new MemoryDevice(fs, room, i + 1, `/home/d${i}/notes`, `/home/d${i}/state.log`, () =>
        fs.now(),
      ),
  );
  const files = memoryFiles(fs);
  const ledger = new Ledger(files);
  for (const each of devices) await each.start();
  // A pause: the network delivers to one device (a short one) or to all.
  for (const step of ops) {
    if (step.kind === 'mode') {
      const path = posix.join(devices[step.device]!.dir, names[step.file]!);
      ledger.trace.push(`mode ${step.mode.toString(8)} of ${path}`);
      if (fs.textAt(path) !== undefined) fs.setMode(path, step.mode);
      continue;
    }
    await perform([step], devices, ledger, files, async (ms) => {
      for (const [i, each] of devices.entries()) if (ms >= 60 || ms % 3 === i) each.deliver();
    });
  }
  for (const each of devices) each.crashAtNextBatch(false);
  for (const each of devices) await each.start();
  let last = '';
  let agreed: [string, string][] | undefined;
  for (let round = 0; round < 30 && agreed === undefined; round += 1) {
    for (const each of devices) {
      each.deliver();
      each.scan();
    }
    const listings = devices.map((each) => JSON.stringify(listing(fs, each.dir)));
    const quiet = devices.every((each) => each.inbox.length === 0);
    if (quiet && listings.every((l) => l === listings[0]) && listings[0] === last)
      agreed = listing(fs, devices[0]!.dir);
    last = listings.every((l) => l === listings[0]) ? listings[0]! : '';
  }
  const detail = () =>
    `steps:\n  ${ledger.trace.join('\n  ')}\n${devices
      .map(
        (each, i) =>
          `device ${i}: ${JSON.stringify(listing(fs, each.dir))}\n  ${each.lines.join('\n  ')}`,
      )
      .join('\n')}`;
  expect(agreed, agreed === undefined ? `the folders never agreed\n${detail()}` : '').toBeDefined();
  const byPath = textsOf(agreed!);
  const lost = lostTokens(byPath, ledger);
  expect(lost, lost.length === 0 ? '' : detail()).toEqual([]);
  const doubled = doubledTokens(byPath, ledger);
  expect(doubled, doubled.length === 0 ? '' : detail()).toEqual([]);
  for (const each of devices) await each.stop();
}

describe('folder engine: the model in memory, no host and no disk', () => {
  it(
    'keeps every folder identical and every written line somewhere, whatever the order',
    async () => {
      const steps = fc.array(
        fc.oneof(
          { weight: 19, arbitrary: op.filter((step) => step.kind !== 'binary') },
          { weight: 1, arbitrary: modeOp },
        ),
        { minLength: 10, maxLength: 80, size: 'max' },
      );
      await fc.assert(fc.asyncProperty(steps, run), {
        numRuns: runs,
        seed:
          process.env.ENGINE_MODEL_SEED === undefined
            ? undefined
            : Number(process.env.ENGINE_MODEL_SEED),
        path: process.env.ENGINE_MODEL_PATH,
        endOnFailure: process.env.ENGINE_MODEL_SHRINK !== '1',
      });
    },
    Math.max(120_000, runs * 500),
  );
});
