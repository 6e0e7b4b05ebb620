// The compiled build of the host, the relay and the command line (esbuild), for `npm run build`
// (dist/sync-host.cjs, loaded by bin/sync-host) and `npm run build:bin` (the single executable's
// script). The admin UI is bundled here too, once, instead of at start.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Plugin } from 'esbuild';
import { buildRenderer } from '../server/admin/renderer-bundle.ts';
import { repoRoot } from './electron-bundle.ts';

/**
 * Entry points of the compiled build: output name in dist/ → source exporting
 * `main(argv): Promise<number>`. A moved entry is a change of this line.
 */
export const entryPoints = { 'sync-host': 'program/main.ts' } as const;

/** Source modules the builds replace: the kind of build, and how the executable loads SQLite. */
const replacedInSea: Record<string, string> = {
  'server/build-kind.ts': 'build/sea/build-kind.ts',
  'server/db/better-sqlite3.ts': 'build/sea/better-sqlite3.ts',
};

/**
 * Packages left out of the bundle. Native addons (better-sqlite3, and the optional speed-ups of
 * ws) load from node_modules; esbuild and tsx only build, Electron is the tray app's. The
 * single executable bundles better-sqlite3's JavaScript and carries its addon as an asset.
 */
const external = [
  'better-sqlite3',
  'bufferutil',
  'utf-8-validate',
  'electron',
  'esbuild',
  'tsx',
  'tsx/*',
  'pg-native',
];

export type BundleKind = 'dist' | 'sea';

function replacePlugin(root: string, kind: BundleKind): Plugin {
  return {
    name: 'sync-host-build-kind',
    setup(build) {
      build.onLoad(
        { filter: /[\\/]server[\\/](build-kind|db[\\/]better-sqlite3)\.ts$/ },
        (args) => {
          const file = relative(root, args.path).replaceAll('\\', '/');
          const replacement = kind === 'sea' ? replacedInSea[file] : undefined;
          if (replacement !== undefined) {
            return {
              contents: readFileSync(join(root, replacement), 'utf8'),
              loader: 'ts',
              resolveDir: join(root, dirname(replacement)),
            };
          }
          const source = readFileSync(args.path, 'utf8');
          // The compiled build differs from the sources in its kind only.
          if (file !== 'server/build-kind.ts') return { contents: source, loader: 'ts' };
          const contents = source.replace(
            "buildKind: BuildKind = 'source';",
            `buildKind: BuildKind = '${kind}';`,
          );
          if (contents === source) throw new Error(`${file}: no buildKind = 'source' to replace`);
          return { contents, loader: 'ts' };
        },
      );
    },
  };
}

/**
 * In the single executable, `require` reaches Node's own modules only: a package left out is a
 * module that is not found (ws and pg then go without their optional native speed-ups).
 */
const absentInSea: Plugin = {
  name: 'sync-host-absent-in-sea',
  setup(build) {
    const names = external.filter((name) => name !== 'better-sqlite3');
    const filter = new RegExp(`^(${names.map((n) => n.replace('/*', '(/.*)?')).join('|')})$`);
    build.onResolve({ filter }, (args) => ({ path: args.path, namespace: 'absent' }));
    build.onLoad({ filter: /.*/, namespace: 'absent' }, (args) => ({
      contents: `throw Object.assign(new Error(${JSON.stringify(`${args.path} is not in the single executable`)}), { code: 'MODULE_NOT_FOUND' });`,
      loader: 'js',
    }));
  },
};

/** Writes a file beside its final name, then renames it: a reader never sees half a bundle. */
function writeAtomically(path: string, contents: Uint8Array): void {
  const aside = `${path}.${process.pid}.tmp`;
  writeFileSync(aside, contents);
  renameSync(aside, path);
}

/**
 * Bundles `entry` into one CommonJS file (everything but `external`): `dist` exports `main`,
 * `sea` runs it (the single executable's script must be CommonJS on Node 20).
 */
export async function bundle(kind: BundleKind, outfile: string, root = repoRoot): Promise<void> {
  const esbuild = await import('esbuild');
  const entry = entryPoints['sync-host'];
  const result = await esbuild.build({
    entryPoints: [join(root, entry)],
    outfile,
    write: false,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    external: kind === 'sea' ? [] : external,
    // Modules compute paths from import.meta.url; in one bundle it is the bundle's own URL (which
    // sits one folder below the package root, as every source module does).
    define: { 'import.meta.url': '__syncHostBundleUrl', 'import.meta.dirname': '__dirname' },
    banner: {
      js: "const __syncHostBundleUrl = require('node:url').pathToFileURL(__filename).href;",
    },
    footer:
      kind === 'sea'
        ? {
            js: 'module.exports.main(process.argv.slice(2)).then((code) => { process.exitCode = code; });',
          }
        : undefined,
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: 'eof',
    plugins:
      kind === 'sea' ? [absentInSea, replacePlugin(root, kind)] : [replacePlugin(root, kind)],
    logLevel: 'error',
  });
  mkdirSync(dirname(outfile), { recursive: true });
  for (const file of result.outputFiles) {
    // The compiled build's first line names this build (a hash of the rest): its code cache is
    // used only with the build it was made from (bin/load-compiled.js), whatever the file times.
    const named =
      kind === 'dist'
        ? Buffer.concat([
            Buffer.from(
              `// sync-host build ${createHash('sha256').update(file.contents).digest('hex').slice(0, 32)}\n`,
            ),
            file.contents,
          ])
        : file.contents;
    writeAtomically(file.path, named);
  }
}

/** Where sql.js's WebAssembly file is (its JavaScript looks beside itself: dist/ once bundled). */
export function sqlWasmPath(root = repoRoot): string {
  return createRequire(join(root, 'package.json')).resolve('sql.js/dist/sql-wasm.wasm');
}

/**
 * `npm run build`'s part for the host: dist/sync-host.cjs, sql.js's WebAssembly beside it and the
 * admin UI in dist/renderer/. `outDir` other than dist/ is for tests.
 */
export async function buildDist(outDir = join(repoRoot, 'dist'), root = repoRoot): Promise<void> {
  await buildRenderer(join(root, 'renderer'), join(outDir, 'renderer'));
  const compiled = join(outDir, 'sync-host.cjs');
  await bundle('dist', compiled, root);
  copyFileSync(sqlWasmPath(root), join(outDir, 'sql-wasm.wasm'));
  writeCodeCache(compiled, root);
}

/**
 * dist/sync-host.cjs.cache: V8's code cache of the compiled build, made by the node running the
 * build, in a process of its own (loading the bundle runs its modules' top level), for
 * bin/sync-host (bin/load-compiled.js; another node's or another build's cache is not used).
 */
function writeCodeCache(compiled: string, root: string): void {
  const loader = pathToFileURL(join(root, 'bin', 'load-compiled.js')).href;
  const script = `import { writeCodeCache } from ${JSON.stringify(loader)}; writeCodeCache(${JSON.stringify(compiled)}); process.exit(0);`;
  execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}
