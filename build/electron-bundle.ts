import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Repository root (build/ lives directly under it). */
export const repoRoot = fileURLToPath(new URL('..', import.meta.url));

/**
 * Bundles the Electron main process (with the host it embeds) to dist/electron-main.mjs and the
 * preload script to dist/electron-preload.cjs. Packages in node_modules stay external (native
 * modules such as better-sqlite3 cannot be bundled). The main bundle sits directly in dist/ so
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
    packages: 'external',
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
