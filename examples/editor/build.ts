import { build } from 'esbuild';

/**
 * Bundles the editor example (`main.ts` → `editor.js` beside `index.html`) with the project's
 * esbuild. `npm run build:example`; `outdir` defaults to `examples/editor/dist`.
 */
export async function buildEditorExample(outdir = 'examples/editor/dist', write = true) {
  return build({
    entryPoints: { editor: 'examples/editor/main.ts' },
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    outdir,
    write,
    logLevel: 'warning',
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await buildEditorExample();
  // index.html beside the bundle: the whole example is one folder to serve.
  const { copyFileSync } = await import('node:fs');
  copyFileSync('examples/editor/index.html', 'examples/editor/dist/index.html');
}
