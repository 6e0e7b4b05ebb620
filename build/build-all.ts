// `npm run build`: the host, relay and command line compiled to dist/sync-host.cjs (with sql.js's
// WebAssembly beside it), the admin UI bundle (dist/renderer/) and the Electron bundles
// (dist/electron-*). Nothing here downloads Electron.
import { buildDist } from './bundle.ts';
import { buildElectronBundles } from './electron-bundle.ts';

await buildDist();
await buildElectronBundles();
process.stdout.write(
  'built dist/sync-host.cjs, dist/renderer/, dist/electron-main.mjs and dist/electron-preload.cjs\n',
);
