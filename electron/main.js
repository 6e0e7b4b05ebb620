// Electron entry (package.json "main"): the bundled main process, built by `npm run build`
// (and by `sync-host` before it launches the tray app).
import '../dist/electron-main.mjs';
