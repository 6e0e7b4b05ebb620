import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerProject, startTestHost, type TestHost } from '../helpers/host.ts';
import { FolderDevice, textFiles } from './devices.ts';

/**
 * The folder sync's invariant under random use, on the real host: 3 devices create, edit,
 * append, overwrite, write in two steps, rename, delete, make a folder where another device has
 * a file, write binary files (kept as chunks through the host: never merged, a version made
 * apart kept as a conflict copy), stop, are killed (also in the middle of writing what other
 * devices sent: the batch recorded, its files not yet changed) and start again, at once and
 * apart; scans of the whole folder and of one path (as the watcher's events bring) come in
 * between; each device fetches the others' binary files ahead while they go up, as `sync` does.
 * After every run, once all are back and quiet: every folder holds the same files, and
 * every line a device wrote is in one of them unless a device removed it from a file it had on
 * disk (an overwrite, an edit, a delete, a rename over it), and no line is twice in one file
 * (a merge never doubles a line). Each written line is a unique token.
 */

/** The names the steps use: a file and a folder of one name, a name that is Object's prototype. */
const names = [
  'a.md',
  'b.md',
  'notes/c.md',
  'notes/d.txt',
  'a.md/x.md',
  'notes',
  'e.md',
  '__proto__',
];
const runs = Number(process.env.FOLDER_MODEL_RUNS ?? 60);

type Op =
  | {
      kind: 'write';
      device: number;
      file: number;
      how: 'create' | 'append' | 'insert' | 'overwrite' | 'partial';
      at: number;
    }
  | { kind: 'rename'; device: number; file: number; to: number }
  | { kind: 'delete'; device: number; file: number }
  | { kind: 'binary'; device: number; file: number }
  | { kind: 'stop' | 'kill' | 'crash' | 'start' | 'scan'; device: number }
  | { kind: 'notice'; device: number; file: number }
  | { kind: 'pause'; ms: number };

const device = fc.integer({ min: 0, max: 2 });
const file = fc.integer({ min: 0, max: names.length - 1 });
const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('write' as const),
      device,
      file,
      how: fc.constantFrom('create', 'append', 'insert', 'overwrite', 'partial'),
      at: fc.nat(20),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('rename' as const), device, file, to: file }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('delete' as const), device, file }) },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('binary' as const), device, file: fc.nat(2) }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constantFrom('stop', 'kill', 'start'), device }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('crash' as const), device }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('scan' as const), device }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('notice' as const), device, file }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('pause' as const),
      ms: fc.integer({ min: 0, max: 120 }),
    }),
  },
);

/** The tokens (`t<n>`) in a text; greedy, so `t12` never counts as `t1`. */
function tokensOf(text: string | undefined): Set<string> {
  return new Set((text ?? '').match(/t\d+/g) ?? []);
}

function readIfFile(path: string): string | undefined {
  try {
    return statSync(path).isFile() ? readFileSync(path, 'utf8') : undefined;
  } catch {
    return undefined;
  }
}

/** What the run did, checked at its end. */
class Ledger {
  private next = 0;
  readonly written = new Set<string>();
  readonly removed = new Set<string>();
  /** What each step did, shown when a run fails. */
  readonly trace: string[] = [];

  token(): string {
    this.next += 1;
    const token = `t${this.next}`;
    this.written.add(token);
    return token;
  }

  /** A device's own write of `path`: the tokens it had on disk there and drops are removed. */
  write(path: string, content: string): boolean {
    const before = readIfFile(path);
    try {
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, content);
    } catch {
      return false; // a file where a folder is needed, or the other way round: nothing changed
    }
    const after = tokensOf(content);
    for (const token of tokensOf(before)) if (!after.has(token)) this.removed.add(token);
    this.trace.push(`write ${path}: ${JSON.stringify(before)} → ${JSON.stringify(content)}`);
    return true;
  }

  delete(path: string): void {
    const before = readIfFile(path);
    if (before === undefined) return;
    unlinkSync(path);
    for (const token of tokensOf(before)) this.removed.add(token);
    this.trace.push(`delete ${path}: ${JSON.stringify(before)}`);
  }

  rename(from: string, to: string): void {
    if (readIfFile(from) === undefined || from === to || to.startsWith(`${from}/`)) return;
    const overwritten = readIfFile(to);
    try {
      mkdirSync(dirname(to), { recursive: true });
      renameSync(from, to);
    } catch {
      return;
    }
    for (const token of tokensOf(overwritten)) this.removed.add(token);
    this.trace.push(`rename ${from} → ${to} (over ${JSON.stringify(overwritten)})`);
  }
}

async function perform(ops: Op[], devices: FolderDevice[], ledger: Ledger): Promise<void> {
  for (const step of ops) {
    if (step.kind === 'pause') {
      await new Promise((resolve) => setTimeout(resolve, step.ms));
      continue;
    }
    const target = devices[step.device]!;
    if (
      step.kind !== 'write' &&
      step.kind !== 'rename' &&
      step.kind !== 'delete' &&
      step.kind !== 'notice'
    ) {
      ledger.trace.push(`${step.kind} device ${step.device}`);
    }
    const path = (index: number) => join(target.dir, names[index]!);
    switch (step.kind) {
      case 'write': {
        const before = readIfFile(path(step.file));
        if (step.how === 'create' && before !== undefined) break;
        const token = ledger.token();
        const lines = (before ?? '').split('\n').filter((line) => line !== '');
        if (step.how === 'overwrite' || before === undefined) lines.splice(0, lines.length, token);
        else if (step.how === 'insert') lines.splice(step.at % (lines.length + 1), 0, token);
        else lines.push(token);
        const content = `${lines.join('\n')}\n`;
        let written: boolean;
        if (step.how === 'partial') {
          // An editor that writes in two steps with a scan between them; what arrived between
          // the steps is overwritten by the second (the ledger counts it as removed there).
          // The first step ends at a line's end: a token cut in two and edited on another
          // device between the steps may merge with that edit inside it (no byte is lost, but
          // the token could not be found whole).
          const firstLines = lines.slice(0, Math.floor(lines.length / 2));
          const first = firstLines.length === 0 ? '' : `${firstLines.join('\n')}\n`;
          written = ledger.write(path(step.file), first);
          target.scan();
          written = written && ledger.write(path(step.file), content);
        } else written = ledger.write(path(step.file), content);
        if (!written) ledger.written.delete(token);
        break;
      }
      case 'rename':
        ledger.rename(path(step.file), path(step.to));
        break;
      case 'delete':
        ledger.delete(path(step.file));
        break;
      case 'binary': {
        // A whole new version of a binary file (a NUL makes it one), overwriting what was here.
        const token = ledger.token();
        if (!ledger.write(join(target.dir, `bin-${step.file}.dat`), `\0${token}\n`)) {
          ledger.written.delete(token);
        }
        break;
      }
      case 'stop':
        await target.stop();
        break;
      case 'kill':
        await target.kill();
        break;
      case 'crash':
        target.crashAtNextBatch();
        break;
      case 'start':
        await target.start();
        break;
      case 'scan':
        target.scan();
        break;
      case 'notice':
        target.notice(names[step.file]!);
        break;
    }
  }
}

/** Waits until every device is joined and all folders agree, twice in a row. */
async function quiet(devices: FolderDevice[]): Promise<Record<string, string>> {
  const until = Date.now() + 30_000;
  let last = '';
  for (;;) {
    for (const each of devices) each.scan();
    await new Promise((resolve) => setTimeout(resolve, 150));
    const listings = devices.map((each) => textFiles(each.dir, true));
    const first = JSON.stringify(listings[0]);
    const agree =
      devices.every((each) => each.joined) && listings.every((l) => JSON.stringify(l) === first);
    if (agree && first === last) return listings[0]!;
    last = agree ? first : '';
    if (Date.now() > until) {
      const lines = devices.map((each, i) => `device ${i}:\n  ${each.lines.join('\n  ')}`);
      throw new Error(
        `the folders did not agree within 30 s:\n${listings.map((l) => JSON.stringify(l)).join('\n')}\n${lines.join('\n')}`,
      );
    }
  }
}

describe('folder sync: model-based run over the real host', () => {
  let th: TestHost;
  let root: string;
  const credentials: { deviceId: number; deviceToken: string }[] = [];
  let runCount = 0;

  beforeAll(async () => {
    th = await startTestHost({ ui: false });
    root = mkdtempSync(join(tmpdir(), 'folder-model-'));
    for (let i = 0; i < 3; i += 1)
      credentials.push(await th.signIn('model@example.org', `model-${i}`));
  });

  afterAll(async () => {
    await th?.close();
    if (root !== undefined) rmSync(root, { recursive: true, force: true });
  });

  async function run(ops: Op[]): Promise<void> {
    runCount += 1;
    const { roomId } = await registerProject(
      th.base,
      credentials[0]!.deviceToken,
      `model-${runCount}`,
    );
    const base = join(root, `run-${runCount}`);
    const devices = credentials.map(
      (credential, i) =>
        new FolderDevice(
          th,
          roomId,
          credential,
          join(base, `folder-${i}`),
          join(base, `state-${i}.log`),
          {
            limits: { filesPerMinute: 100_000, bytesPerMinute: 1 << 30 },
            // Each device fetches the others' uploads under way ahead, as `sync` does;
            // FOLDER_MODEL_PREFETCH=0 leaves that out (to compare).
            prefetch: process.env.FOLDER_MODEL_PREFETCH !== '0',
          },
        ),
    );
    const ledger = new Ledger();
    try {
      for (const each of devices) await each.start();
      await perform(ops, devices, ledger);
      // Every device back for good: a crash still armed would leave one down.
      for (const each of devices) each.crashAtNextBatch(false);
      for (const each of devices) await each.start();
      const files = await quiet(devices).catch((err: unknown) => {
        // The steps too: a disagreement left behind is as much a counterexample as a lost line.
        const message = err instanceof Error ? err.message : String(err);
        throw new Error(`${message}\nsteps:\n  ${ledger.trace.join('\n  ')}`);
      });
      const everything = new Set<string>();
      for (const text of Object.values(files))
        for (const token of tokensOf(text)) everything.add(token);
      const lost = [...ledger.written].filter((t) => !ledger.removed.has(t) && !everything.has(t));
      const detail = () => {
        const lines = devices.map((each, i) => `device ${i}:\n  ${each.lines.join('\n  ')}`);
        return `files: ${JSON.stringify(files)}\nsteps:\n  ${ledger.trace.join('\n  ')}\n${lines.join('\n')}`;
      };
      expect(lost, lost.length === 0 ? '' : detail()).toEqual([]);
      // No line doubled by a merge: each token (a line of its own) is once in its file.
      const doubled = Object.entries(files).flatMap(([path, text]) => {
        const tokens = (text.match(/t\d+/g) ?? []).sort();
        return tokens.filter((t, i) => tokens[i - 1] === t).map((t) => `${t} in ${path}`);
      });
      expect(doubled, doubled.length === 0 ? '' : detail()).toEqual([]);
    } finally {
      for (const each of devices) await each.stop();
    }
  }

  // Counterexamples the property found, kept as named runs.
  it('keeps both words when two devices rewrite the same word at once (t1 → t9 and t1 → t12 gave t92)', async () => {
    await run([
      { kind: 'write', device: 2, file: 2, how: 'create', at: 0 },
      { kind: 'scan', device: 2 },
      { kind: 'pause', ms: 120 },
      { kind: 'scan', device: 1 },
      { kind: 'write', device: 2, file: 2, how: 'overwrite', at: 0 },
      { kind: 'write', device: 1, file: 2, how: 'overwrite', at: 0 },
      { kind: 'scan', device: 2 },
    ]);
  }, 60_000);

  it('writes a file from another device in place of an empty folder a rename left here', async () => {
    await run([
      { kind: 'write', device: 2, file: 2, how: 'create', at: 0 },
      { kind: 'scan', device: 2 },
      { kind: 'pause', ms: 150 },
      { kind: 'rename', device: 2, file: 2, to: 1 },
      { kind: 'scan', device: 2 },
      { kind: 'pause', ms: 150 },
      { kind: 'scan', device: 0 },
      { kind: 'write', device: 0, file: 5, how: 'create', at: 0 },
      { kind: 'scan', device: 0 },
    ]);
  }, 60_000);

  it(
    'keeps every folder identical and every written line somewhere, whatever the order',
    async () => {
      // Lengths spread over the whole range (fast-check's default size keeps most near 10-20):
      // 60 runs are about 2,500 steps.
      const steps = fc.array(op, { minLength: 10, maxLength: 80, size: 'max' });
      await fc.assert(fc.asyncProperty(steps, run), {
        numRuns: runs,
        seed:
          process.env.FOLDER_MODEL_SEED === undefined
            ? undefined
            : Number(process.env.FOLDER_MODEL_SEED),
        // A run fast-check reported (`path`), replayed from there: the timing may differ.
        path: process.env.FOLDER_MODEL_PATH,
        endOnFailure: true,
      });
    },
    Math.max(600_000, runs * 2_000),
  );
});
