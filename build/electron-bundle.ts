import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Repository root (build/ lives directly under it). */
export const repoRoot = fileURLToPath(new URL('..', import.meta.url));

/**
 * Bundles the Electron main process (with the host it embeds) to dist/electron-main.mjs and the
 * preload script to dist/electron-preload.cjs. Packages are bundled except native modules such as
 * better-sqlite3 (they load from node_modules). The main bundle sits directly in dist/ so
 * that `../package.json` relative to it is the package's own file, as it is for server/*.ts.
 */
export async function buildElectronBundles(root = repoRoot): Promise<void> {
  const esbuild = await import('esbuild');
  await esbuild.build({
    entryPoints: [join(root, 'electron', 'main.ts')],
    outfile: join(root, 'dist', 'electron-main.mjs'),
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    // Everything but native addons and Electron is bundled (the packaged app carries no
    // node_modules for them); CommonJS packages inside an ES module need require and __dirname.
    external: [
      'electron',
      'better-sqlite3',
      'bufferutil',
      'utf-8-validate',
      'esbuild',
      'tsx',
      'pg-native',
    ],
    banner: {
      js: [
        "import { createRequire as __createRequire } from 'node:module';",
        "import { fileURLToPath as __fileURLToPath } from 'node:url';",
        'const require = __createRequire(import.meta.url);',
        'const __filename = __fileURLToPath(import.meta.url);',
        "const __dirname = __fileURLToPath(new URL('.', import.meta.url));",
      ].join('\n'),
    },
    sourcemap: 'linked',
    logLevel: 'silent',
  });
  await esbuild.build({
    entryPoints: [join(root, 'electron', 'preload.ts')],
    outfile: join(root, 'dist', 'electron-preload.cjs'),
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    external: ['electron'],
    logLevel: 'silent',
  });
}
