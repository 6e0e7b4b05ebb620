import ignore, { type Ignore } from 'ignore';

/** The rules file at the folder's root: synced like any file, read on every device. */
export const syncIgnoreName = '.syncignore';

/**
 * What stays on this device: paths matched by the folder's `.syncignore` (gitignore syntax,
 * through the `ignore` package), and dot files and folders unless a rule re-includes them
 * (`!.obsidian/`). `.syncignore` itself always syncs. Matched files are never read, sent,
 * written, moved or deleted by the sync; an entry another device sent for such a path stays in
 * the document, unwritten, and is written if the rules change to let it through.
 */
export class SyncIgnore {
  private readonly rules: Ignore;
  /** The problem with the rules, when a line could not be read (the defaults apply then). */
  readonly problem: string | undefined;

  constructor(readonly text: string | undefined) {
    const rules = ignore({ allowRelativePaths: false }).add('.*');
    let problem: string | undefined;
    try {
      if (text !== undefined) rules.add(text);
    } catch (err: unknown) {
      problem = err instanceof Error ? err.message : String(err);
    }
    this.rules = problem === undefined ? rules : ignore().add('.*');
    this.problem = problem;
  }

  /** Whether `path` (relative, `/`-separated, a name that passed `pathProblem`) stays here. */
  ignores(path: string, isFolder = false): boolean {
    if (path === syncIgnoreName) return false;
    return this.rules.ignores(isFolder ? `${path}/` : path);
  }
}

/**
 * The paths this device found on disk and kept here by its rules (a folder with a trailing `/`):
 * they stay here when rules from another device would let them through (`!.*` in a
 * `.syncignore` written elsewhere must not send this device's `.env` or `.ssh/`). Only an edit
 * of `.syncignore` made on this device lets them go (`confirm`). Rules that keep more apply at
 * once, wherever they were written. Kept in the state log across restarts.
 */
export class KeptLocal {
  private readonly paths: Set<string>;
  /** Whether the set changed since the last `take` (for the state log). */
  private changed = false;

  constructor(paths: Iterable<string> = []) {
    this.paths = new Set(paths);
  }

  /** Whether `path`, or a folder above it, was kept here. */
  covers(path: string): boolean {
    if (this.paths.size === 0) return false;
    if (this.paths.has(path)) return true;
    for (let at = path.length; at > 0; at = path.lastIndexOf('/', at - 1)) {
      if (this.paths.has(`${path.slice(0, at)}/`)) return true;
    }
    return false;
  }

  /** A path found on disk that the rules keep here. */
  add(path: string, isFolder: boolean): void {
    const key = isFolder ? `${path}/` : path;
    if (this.paths.has(key)) return;
    this.paths.add(key);
    this.changed = true;
  }

  /**
   * Lets go of what `rules` let through (they were edited here) and of what is gone from disk
   * while the rules still keep it (a kept path the rules now let through stays, though gone, so
   * that a file made there again is not sent). Resolves with the paths let through.
   */
  settle(rules: SyncIgnore, exists: (path: string) => boolean, edited: boolean): string[] {
    const freed: string[] = [];
    for (const key of this.paths) {
      const isFolder = key.endsWith('/');
      const path = isFolder ? key.slice(0, -1) : key;
      const kept = rules.ignores(path, isFolder);
      if ((edited && !kept) || (kept && !exists(path))) {
        this.paths.delete(key);
        this.changed = true;
        if (!kept) freed.push(path);
      }
    }
    return freed;
  }

  /** Whether the set changed since the last `take`. */
  get unsaved(): boolean {
    return this.changed;
  }

  /** The whole set when it changed since the last call, else undefined. */
  take(): string[] | undefined {
    if (!this.changed) return undefined;
    this.changed = false;
    return [...this.paths];
  }
}
