import { copyFileSync, existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { appRoot } from '../build-kind.ts';

/** Folder of the admin UI sources (TypeScript, HTML, CSS), next to server/ in the repository. */
export const rendererSourceDir = join(appRoot, 'renderer');
/** Folder the bundled admin UI is written to and served from. */
export const rendererDistDir = join(appRoot, 'dist', 'renderer');

/** Files the bundle consists of; app.js is bundled, the others are copied. */
export const rendererFiles = ['index.html', 'app.css', 'favicon.svg', 'app.js'] as const;

function newestMtimeMs(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtimeMs(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/** Whether the bundle is missing, or older than a source file (when the sources are present). */
export function rendererBundleIsStale(
  sourceDir = rendererSourceDir,
  distDir = rendererDistDir,
): boolean {
  const built = rendererFiles.map((f) => join(distDir, f));
  if (!built.every((f) => existsSync(f))) return true;
  if (!existsSync(sourceDir)) return false;
  const oldest = Math.min(...built.map((f) => statSync(f).mtimeMs));
  return newestMtimeMs(sourceDir) > oldest;
}

/**
 * Bundles renderer/main.ts with esbuild into `distDir`/app.js and copies index.html and
 * the other files. Runs at host start when the bundle is stale (well under a second) or from `npm run build`.
 */
export async function buildRenderer(
  sourceDir = rendererSourceDir,
  distDir = rendererDistDir,
): Promise<void> {
  const esbuild = await import('esbuild');
  mkdirSync(distDir, { recursive: true });
  await esbuild.build({
    entryPoints: [join(sourceDir, 'main.ts')],
    outfile: join(distDir, 'app.js'),
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: ['chrome110', 'firefox115', 'safari16'],
    minify: true,
    sourcemap: false,
    legalComments: 'none',
    logLevel: 'silent',
  });
  for (const file of rendererFiles) {
    if (file !== 'app.js') copyFileSync(join(sourceDir, file), join(distDir, file));
  }
}

/** Builds the bundle when it is missing or stale (a fresh clone's first `npm start`). */
export async function ensureRendererBundle(
  sourceDir = rendererSourceDir,
  distDir = rendererDistDir,
): Promise<void> {
  if (rendererBundleIsStale(sourceDir, distDir)) await buildRenderer(sourceDir, distDir);
}
