import { cpSync, mkdirSync, readdirSync, symlinkSync } from 'node:fs';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '../..');

/**
 * A copy of the program in `tree` (an empty folder) whose node_modules holds every installed
 * package except better-sqlite3, as after an `npm install` that could not build the optional
 * addon. The sources are copied (a symlinked file would resolve its imports from the real
 * node_modules); packages are symlinked. Returns `tree`; its launcher is `tree/bin/sync-host`.
 */
export function treeWithoutNativeSqlite(tree: string): string {
  for (const part of [
    'bin',
    'program',
    'server',
    'client',
    'protocol',
    'renderer',
    'package.json',
    'tsconfig.json',
  ])
    cpSync(join(root, part), join(tree, part), { recursive: true });
  mkdirSync(join(tree, 'node_modules'));
  for (const name of readdirSync(join(root, 'node_modules'))) {
    if (name === 'better-sqlite3' || name === '.bin') continue;
    symlinkSync(join(root, 'node_modules', name), join(tree, 'node_modules', name));
  }
  return tree;
}
