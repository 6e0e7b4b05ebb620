import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import * as Y from 'yjs';

/** Files larger than this are not synced (skipped with a line). */
export const maxFileBytes = 1_048_576;
/** Transaction origin of changes read from the folder. */
const localOrigin = 'folder';
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** What the folder sync reports: one line per file change or problem. */
export type FolderLog = (line: string) => void;

/** The last content each file had when the folder and the document agreed. */
export type Base = Record<string, string>;

/**
 * Keeps a folder of text files and a Yjs document in step: the document's `files` map holds one
 * `Y.Text` per relative path (with `/`). `scan()` reads the folder and turns what changed since
 * the last agreement (`base`) into document edits; changes that come from other devices are
 * written to the folder at once. An edit made on disk while a remote edit of the same file
 * arrives is kept: its position is moved through the remote change before it is applied.
 */
export class FolderSync {
  readonly files: Y.Map<Y.Text>;
  private readonly skipped = new Set<string>();

  constructor(
    readonly dir: string,
    readonly doc: Y.Doc,
    readonly base: Base,
    private readonly log: FolderLog,
  ) {
    this.files = doc.getMap<Y.Text>('files');
    this.files.observeDeep((events, transaction) => {
      if (transaction.origin !== localOrigin) this.applyRemote(events);
    });
  }

  /** Reads the folder and sends what changed on disk since the last agreement. */
  scan(): void {
    const onDisk = this.readFolder();
    this.doc.transact(() => {
      for (const [path, content] of onDisk) {
        const text = this.files.get(path);
        if (text === undefined) {
          this.files.set(path, new Y.Text(content));
          this.log(`sent ${path} (new)`);
        } else if (content !== this.base[path] && content !== text.toString()) {
          replaceText(text, content);
          this.log(`sent ${path}`);
        }
        this.base[path] = content;
      }
      for (const path of Object.keys(this.base)) {
        if (onDisk.has(path) || this.skipped.has(path)) continue;
        delete this.base[path];
        if (this.files.has(path)) {
          this.files.delete(path);
          this.log(`sent ${path} (deleted)`);
        }
      }
    }, localOrigin);
    // Paths the document has and the folder never had (the first start after another device).
    for (const [path, text] of this.files) {
      if (!onDisk.has(path) && this.base[path] === undefined) this.write(path, text.toString());
    }
  }

  private applyRemote(events: Y.YEvent<Y.AbstractType<unknown>>[]): void {
    for (const event of events) {
      if (event.target === this.files) {
        for (const [path, change] of event.changes.keys) {
          const text = this.files.get(path);
          if (change.action === 'delete' || text === undefined) this.remove(path);
          else this.write(path, text.toString());
        }
      } else if (event.target instanceof Y.Text) {
        const path = event.path[0];
        if (typeof path !== 'string' || this.files.get(path) !== event.target) continue;
        this.mergeAndWrite(path, event.target, event.delta);
      }
    }
  }

  /** A remote edit of `path`: an unsent edit on disk is moved through it, then both are written. */
  private mergeAndWrite(path: string, text: Y.Text, delta: Y.YEvent<Y.Text>['delta']): void {
    const before = this.base[path];
    const disk = this.readFile(path);
    if (before !== undefined && disk !== undefined && disk !== before) {
      const edit = diff(before, disk);
      const start = moveIndex(edit.start, delta);
      const end = Math.max(start, moveIndex(edit.start + edit.deleteCount, delta));
      this.doc.transact(() => {
        text.delete(start, end - start);
        text.insert(start, edit.insert);
      }, localOrigin);
      this.log(`sent ${path} (merged with an edit from another device)`);
    }
    this.write(path, text.toString());
  }

  private write(path: string, content: string): void {
    const file = join(this.dir, path);
    if (this.readFile(path) !== content) {
      mkdirSync(dirname(file), { recursive: true });
      const temp = join(dirname(file), `.${Date.now()}.sync-host-tmp`);
      writeFileSync(temp, content);
      renameSync(temp, file);
      this.log(`received ${path}`);
    }
    this.base[path] = content;
  }

  private remove(path: string): void {
    const disk = this.readFile(path);
    if (disk !== undefined && disk !== this.base[path]) {
      // Edited here and deleted there: the edit wins, as a new file.
      this.doc.transact(() => this.files.set(path, new Y.Text(disk)), localOrigin);
      this.base[path] = disk;
      this.log(`sent ${path} (kept: edited here, deleted on another device)`);
      return;
    }
    if (disk !== undefined) rmSync(join(this.dir, path), { force: true });
    delete this.base[path];
    this.log(`received ${path} (deleted)`);
  }

  private readFile(path: string): string | undefined {
    try {
      return utf8.decode(readFileSync(join(this.dir, path)));
    } catch {
      return undefined;
    }
  }

  /** Every text file under the folder by relative path; binary and large files are skipped. */
  private readFolder(): Map<string, string> {
    const found = new Map<string, string>();
    const walk = (folder: string) => {
      for (const entry of readdirSync(folder, { withFileTypes: true })) {
        if (entry.name.startsWith('.')) continue; // .git, editors' swap files, our temp files
        const full = join(folder, entry.name);
        if (entry.isDirectory()) walk(full);
        if (!entry.isFile()) continue;
        const path = relative(this.dir, full).split(sep).join('/');
        const problem = this.readProblem(full);
        if (typeof problem === 'string') {
          if (!this.skipped.has(path)) this.log(`skipped ${path}: ${problem}`);
          this.skipped.add(path);
          continue;
        }
        this.skipped.delete(path);
        found.set(path, problem.content);
      }
    };
    if (existsSync(this.dir)) walk(this.dir);
    return found;
  }

  private readProblem(file: string): string | { content: string } {
    const size = statSync(file).size;
    if (size > maxFileBytes) return `larger than ${maxFileBytes} bytes (${size})`;
    const bytes = readFileSync(file);
    if (bytes.includes(0)) return 'binary';
    try {
      return { content: utf8.decode(bytes) };
    } catch {
      return 'binary (not UTF-8)';
    }
  }
}

/** The one replacement that turns `from` into `to` (common prefix and suffix kept). */
export function diff(
  from: string,
  to: string,
): { start: number; deleteCount: number; insert: string } {
  let start = 0;
  while (start < from.length && start < to.length && from[start] === to[start]) start += 1;
  let end = 0;
  while (
    end < from.length - start &&
    end < to.length - start &&
    from[from.length - 1 - end] === to[to.length - 1 - end]
  ) {
    end += 1;
  }
  return {
    start,
    deleteCount: from.length - start - end,
    insert: to.slice(start, to.length - end),
  };
}

function replaceText(text: Y.Text, content: string): void {
  const edit = diff(text.toString(), content);
  text.delete(edit.start, edit.deleteCount);
  text.insert(edit.start, edit.insert);
}

/** Where `index` of the text before a change is in the text after it. */
export function moveIndex(index: number, delta: Y.YEvent<Y.Text>['delta']): number {
  let oldPos = 0;
  let moved = index;
  for (const op of delta) {
    if (oldPos > index) break;
    if (op.retain !== undefined) oldPos += op.retain;
    else if (typeof op.insert === 'string') moved += op.insert.length;
    else if (op.delete !== undefined) {
      moved -= Math.min(op.delete, index - oldPos);
      oldPos += op.delete;
    }
  }
  return moved;
}
