// `npm run build:bin`: dist/sync-host, one executable for this platform (Node's single executable
// applications): the node binary running this build, with the bundled program, the admin UI,
// sql.js's WebAssembly and better-sqlite3's addon carried inside. Nothing beside it is read.
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { buildRenderer } from '../server/admin/renderer-bundle.ts';
import { bundle, sqlWasmPath } from './bundle.ts';
import { repoRoot } from './electron-bundle.ts';

/** Marks the place in node's binary that says a program is embedded (Node's documented value). */
const fuse = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

/** better-sqlite3's compiled addon, built for this node by `npm install`. */
function nativeSqliteAddon(root: string): string {
  const pkg = join(
    createRequire(join(root, 'package.json')).resolve('better-sqlite3/package.json'),
    '..',
  );
  return join(pkg, 'build', 'Release', 'better_sqlite3.node');
}

/** Drops node's symbol tables (about 20 MB) when binutils' strip is installed. */
function stripSymbols(file: string): void {
  try {
    execFileSync('strip', ['--strip-unneeded', file], { stdio: 'pipe' });
  } catch (err: unknown) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}

/**
 * Builds the executable at `output` (default dist/sync-host) from the node binary running this
 * script, with its parts made in `work`. Resolves with its path.
 */
export async function buildExecutable(
  output = join(repoRoot, 'dist', 'sync-host'),
  work = join(repoRoot, 'dist', 'sea'),
  root = repoRoot,
): Promise<string> {
  rmSync(work, { recursive: true, force: true });
  mkdirSync(join(work, 'renderer'), { recursive: true });
  const script = join(work, 'sync-host.cjs');
  await bundle('sea', script, root);
  await buildRenderer(join(root, 'renderer'), join(work, 'renderer'));
  const assets: Record<string, string> = {
    'sql-wasm.wasm': sqlWasmPath(root),
    'better_sqlite3.node': nativeSqliteAddon(root),
  };
  for (const name of readdirSync(join(work, 'renderer')))
    assets[`renderer/${name}`] = join(work, 'renderer', name);
  const blob = join(work, 'sync-host.blob');
  const config = join(work, 'sea-config.json');
  writeFileSync(
    config,
    JSON.stringify({
      main: script,
      output: blob,
      disableExperimentalSEAWarning: true,
      useCodeCache: true,
      assets,
    }),
  );
  execFileSync(process.execPath, ['--experimental-sea-config', config], {
    stdio: 'pipe',
  });
  // Made aside and renamed over the output: a running copy of the old one is left alone.
  const aside = `${output}.${process.pid}.tmp`;
  copyFileSync(process.execPath, aside);
  chmodSync(aside, 0o755);
  stripSymbols(aside);
  // postject's ELF reader warns about note sections of node's binary it does not name: noise.
  const warn = console.warn;
  console.warn = (...args: unknown[]) => {
    if (!String(args[0]).startsWith("warning: Can't find string offset")) warn(...args);
  };
  try {
    const { inject } = await import('postject');
    await inject(aside, 'NODE_SEA_BLOB', readFileSync(blob), { sentinelFuse: fuse });
  } finally {
    console.warn = warn;
  }
  renameSync(aside, output);
  return output;
}

if (process.argv[1] === import.meta.filename) {
  const output = await buildExecutable();
  process.stdout.write(`built ${output}\n`);
}
