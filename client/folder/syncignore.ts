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
