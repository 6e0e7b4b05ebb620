// `npm run build`: the admin UI bundle (dist/renderer/) and the Electron bundles (dist/electron-*).
import { buildRenderer } from '../server/admin/renderer-bundle.ts';
import { buildElectronBundles } from './electron-bundle.ts';

await buildRenderer();
await buildElectronBundles();
process.stdout.write(
  'built dist/renderer/, dist/electron-main.mjs and dist/electron-preload.cjs\n',
);
