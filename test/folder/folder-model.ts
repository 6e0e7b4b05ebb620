import { mkdirSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import fc from 'fast-check';

/**
 * The folder sync's model: the steps of a random run (3 devices create, edit, append,
 * overwrite, write in two steps, rename, delete, make a folder where another device has a file,
 * write binary files, stop, are killed, crash in the middle of a batch, start again; scans of the
 * whole folder and of one path come in between), what each step did (the ledger), and the
 * invariant checked after a run. The same model runs over the real host and disk
 * (sync-model.test.ts) and over the engine alone in memory (engine-model.test.ts).
 */

/** The names the steps use: a file and a folder of one name, a name that is Object's prototype. */
export const names = [
  'a.md',
  'b.md',
  'notes/c.md',
  'notes/d.txt',
  'a.md/x.md',
  'notes',
  'e.md',
  '__proto__',
];

export type Op =
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
export const op: fc.Arbitrary<Op> = fc.oneof(
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
export function tokensOf(text: string | undefined): Set<string> {
  return new Set((text ?? '').match(/t\d+/g) ?? []);
}

/** What a user does to the files of a folder (on the real disk, or in memory). */
export interface ModelFiles {
  /** A file's text, or undefined when `path` is not a file. */
  read(path: string): string | undefined;
  /** Writes a whole file, the folders above made as needed. */
  write(path: string, content: string): void;
  unlink(path: string): void;
  /** Renames over what is there, the folders above made as needed. */
  rename(from: string, to: string): void;
}

/** The files of a folder on the real disk. */
export const diskFiles: ModelFiles = {
  read(path) {
    try {
      return statSync(path).isFile() ? readFileSync(path, 'utf8') : undefined;
    } catch {
      return undefined;
    }
  },
  write(path, content) {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, content);
  },
  unlink: (path) => unlinkSync(path),
  rename(from, to) {
    mkdirSync(dirname(to), { recursive: true });
    renameSync(from, to);
  },
};

/** A device of the model: its folder, the watcher's and the user's ways to run it. */
export interface ModelDevice {
  readonly dir: string;
  scan(): void;
  notice(path: string): void;
  start(): Promise<void>;
  stop(): Promise<void>;
  kill(): Promise<void>;
  crashAtNextBatch(armed?: boolean): void;
}

/** What the run did, checked at its end. */
export class Ledger {
  private next = 0;
  readonly written = new Set<string>();
  readonly removed = new Set<string>();
  /** Tokens a device moved over another file (that file's text replaced by theirs). */
  readonly movedOver = new Set<string>();
  /** What each step did, shown when a run fails. */
  readonly trace: string[] = [];

  constructor(private readonly files: ModelFiles) {}

  token(): string {
    this.next += 1;
    const token = `t${this.next}`;
    this.written.add(token);
    return token;
  }

  /** A device's own write of `path`: the tokens it had on disk there and drops are removed. */
  write(path: string, content: string): boolean {
    const before = this.files.read(path);
    try {
      this.files.write(path, content);
    } catch {
      return false; // a file where a folder is needed, or the other way round: nothing changed
    }
    const after = tokensOf(content);
    for (const token of tokensOf(before)) if (!after.has(token)) this.removed.add(token);
    this.trace.push(`write ${path}: ${JSON.stringify(before)} → ${JSON.stringify(content)}`);
    return true;
  }

  delete(path: string): void {
    const before = this.files.read(path);
    if (before === undefined) return;
    this.files.unlink(path);
    for (const token of tokensOf(before)) this.removed.add(token);
    this.trace.push(`delete ${path}: ${JSON.stringify(before)}`);
  }

  rename(from: string, to: string): void {
    if (this.files.read(from) === undefined || from === to || to.startsWith(`${from}/`)) return;
    const overwritten = this.files.read(to);
    try {
      this.files.rename(from, to);
    } catch {
      return;
    }
    for (const token of tokensOf(overwritten)) this.removed.add(token);
    if (overwritten !== undefined)
      for (const token of tokensOf(this.files.read(to))) this.movedOver.add(token);
    this.trace.push(`rename ${from} → ${to} (over ${JSON.stringify(overwritten)})`);
  }
}

export async function perform(
  ops: Op[],
  devices: ModelDevice[],
  ledger: Ledger,
  files: ModelFiles,
  /** What a pause is: time passing (the default), or the network delivering (in memory). */
  pause: (ms: number) => Promise<void> = (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
): Promise<void> {
  for (const step of ops) {
    if (step.kind === 'pause') {
      await pause(step.ms);
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
        const before = files.read(path(step.file));
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

/** The tokens written and not removed by a device that are in no file: lost. */
export function lostTokens(files: Record<string, string>, ledger: Ledger): string[] {
  const everything = new Set<string>();
  for (const text of Object.values(files))
    for (const token of tokensOf(text)) everything.add(token);
  return [...ledger.written].filter((t) => !ledger.removed.has(t) && !everything.has(t));
}

/**
 * Tokens twice in one file (each is a line of its own: a merge never doubles a line), but for
 * those a device removed at some point, and those moved over another file: a line removed on one
 * device (the first step of a write in two steps) while another device edited next to it is a
 * conflict, in which git too keeps the edited line, and the first device may then write it
 * back; a file renamed over another on two devices at once replaces that file's two different
 * texts with the same one, which the shared text keeps as two edits.
 */
export function doubledTokens(files: Record<string, string>, ledger: Ledger): string[] {
  return Object.entries(files).flatMap(([path, text]) => {
    const tokens = (text.match(/t\d+/g) ?? []).sort();
    return tokens
      .filter((t, i) => tokens[i - 1] === t && !ledger.removed.has(t) && !ledger.movedOver.has(t))
      .map((t) => `${t} in ${path}`);
  });
}
