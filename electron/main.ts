// The Electron main process: tray and lifecycle only. The host itself is server/host.ts.
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import {
  app,
  BrowserWindow,
  clipboard,
  dialog,
  ipcMain,
  Menu,
  Notification,
  nativeImage,
  shell,
  Tray,
} from 'electron';
import { pinnedFetch } from '../client/pinning.ts';
import { main as runCli } from '../program/main.ts';
import { createAdminMount } from '../server/admin/index.ts';
import { loadConfig } from '../server/config/load.ts';
import { type Host, startHost } from '../server/host.ts';
import { createLogger, type Logger } from '../server/log.ts';
import { createTrayAdminApi } from './admin-client.ts';
import { autostartDesktopEntry, configDirArg, isCliInvocation, userArgs } from './args.ts';
import { acceptsCertificate } from './certificate-trust.ts';
import {
  createPairingWatch,
  type PairingChoice,
  type PairingNotice,
  runPairingChoice,
} from './pairing-notices.ts';
import {
  runTrayAction,
  statusLine,
  type TrayAction,
  type TrayState,
  trayMenu,
  trayStateOf,
} from './tray-menu.ts';

const args = userArgs(process.argv, app.isPackaged);
/** The app's root: package.json, dist/, build/icons/ (inside app.asar when packaged). */
const appRoot = app.getAppPath();

if (isCliInvocation(args)) {
  // `SyncHost --headless` and the other CLI modes: the same command line as bin/sync-host.
  app.disableHardwareAcceleration();
  runCli(args).then(
    (code) => app.exit(code),
    (err: unknown) => {
      process.stderr.write(`sync-host: ${err instanceof Error ? err.message : String(err)}\n`);
      app.exit(1);
    },
  );
} else if (!app.requestSingleInstanceLock()) {
  app.quit();
} else {
  startTrayApp();
}

/** The pairing requests the tray watches (started once the host runs, stopped at quit). */
type PairingWatch = ReturnType<typeof createPairingWatch>;

/** What the parts of the tray app share; the host, tray, window and state change as it runs. */
interface TrayContext {
  logger: Logger;
  host: Host | undefined;
  tray: Tray | undefined;
  window: BrowserWindow | undefined;
  state: TrayState;
  /** Set once a quit began: closing the window then closes it instead of hiding it. */
  quitting: boolean;
}

function startTrayApp(): void {
  const ctx: TrayContext = {
    logger: createLogger('info'),
    host: undefined,
    tray: undefined,
    window: undefined,
    state: {
      phase: 'starting',
      relay: 'absent',
      connections: 0,
      rooms: 0,
      authUrl: '',
      relayUrl: '',
      openAtLogin: false,
    },
    quitting: false,
  };
  const openDashboard = (fragment?: string): void => openDashboardWindow(ctx, fragment);
  const refresh = createRefresh(ctx, openDashboard);
  const pairingWatch = watchPairings(ctx, openDashboard);
  handleLifecycle(ctx, pairingWatch, openDashboard);
  app.whenReady().then(
    () => startInTray(ctx, { refresh, openDashboard, pairingWatch }),
    (err: unknown) => {
      process.stderr.write(`sync-host: ${err instanceof Error ? err.message : String(err)}\n`);
      app.exit(1);
    },
  );
}

const autostartFile = join(homedir(), '.config', 'autostart', 'sync-host.desktop');

function openAtLogin(): boolean {
  return process.platform === 'linux'
    ? existsSync(autostartFile)
    : app.getLoginItemSettings().openAtLogin;
}

function setOpenAtLogin(on: boolean): void {
  if (process.platform !== 'linux') {
    app.setLoginItemSettings({ openAtLogin: on });
    return;
  }
  if (on) {
    mkdirSync(join(homedir(), '.config', 'autostart'), { recursive: true });
    writeFileSync(
      autostartFile,
      autostartDesktopEntry(process.execPath, app.isPackaged ? undefined : appRoot),
    );
  } else {
    rmSync(autostartFile, { force: true });
  }
}

/** The address this machine reaches its own auth port at (the public URL may be a proxy's). */
function localBaseOf(host: Host | undefined): string {
  const address = host?.auth?.server.address();
  if (!address || typeof address === 'string') return host?.urls.auth ?? '';
  const ip =
    address.address === '0.0.0.0' || address.address === '::' ? '127.0.0.1' : address.address;
  const scheme = host?.authTls ? 'https' : 'http';
  return `${scheme}://${ip.includes(':') ? `[${ip}]` : ip}:${address.port}`;
}

/** The tray's tooltip and menu drawn again from the host's state; a menu item runs its action. */
function createRefresh(ctx: TrayContext, openDashboard: (fragment?: string) => void) {
  const refresh = (): void => {
    if (ctx.host) ctx.state = trayStateOf(ctx.host, openAtLogin());
    if (!ctx.tray) return;
    ctx.tray.setToolTip(statusLine(ctx.state));
    ctx.tray.setContextMenu(
      Menu.buildFromTemplate(
        trayMenu(ctx.state).map((item) => ({
          label: item.label,
          type: item.type,
          enabled: item.enabled,
          checked: item.checked,
          click: item.action ? () => perform(item.action as TrayAction) : undefined,
        })),
      ),
    );
  };
  const perform = (action: TrayAction): void => {
    runTrayAction(action, ctx.state, {
      pauseRelay: async () => ctx.host?.pauseRelay(),
      resumeRelay: async () => ctx.host?.resumeRelay(),
      writeClipboard: (text) => clipboard.writeText(text),
      openDashboard,
      setOpenAtLogin,
      quit: () => app.quit(),
    }).then(refresh, (err: unknown) => {
      dialog.showErrorBox('sync-host', err instanceof Error ? err.message : String(err));
      refresh();
    });
  };
  return refresh;
}

/** The admin UI in the tray's one window (at `fragment`), made when there is none. */
function openDashboardWindow(ctx: TrayContext, fragment?: string): void {
  if (!ctx.host) return;
  const localBase = localBaseOf(ctx.host);
  const page = `${localBase}/admin/${fragment === undefined ? '' : `#${fragment}`}`;
  if (ctx.window && !ctx.window.isDestroyed()) {
    if (fragment !== undefined) void ctx.window.loadURL(page);
    ctx.window.show();
    ctx.window.focus();
    return;
  }
  const origin = localBase;
  const window = new BrowserWindow({
    width: 1100,
    height: 800,
    title: 'sync-host',
    show: false,
    webPreferences: {
      preload: join(appRoot, 'dist', 'electron-preload.cjs'),
      contextIsolation: true,
      nodeIntegration: false,
      sandbox: true,
    },
  });
  ctx.window = window;
  window.webContents.setWindowOpenHandler(({ url }) => {
    if (/^https?:\/\//.test(url)) void shell.openExternal(url);
    return { action: 'deny' };
  });
  window.webContents.on('will-navigate', (event, url) => {
    if (!url.startsWith(`${origin}/admin/`)) event.preventDefault();
  });
  window.once('ready-to-show', () => window.show());
  window.on('close', (event) => {
    // Closing the window keeps the host running in the tray.
    if (!ctx.quitting) {
      event.preventDefault();
      window.hide();
    }
  });
  void window.loadURL(page);
}

/**
 * With TLS, the tray reaches its own host pinned to the host's certificate, and its window
 * accepts that certificate only (a self-signed one no CA vouches for).
 */
function pinToOwnHost(ctx: TrayContext): () => typeof fetch | undefined {
  let pinned: { fingerprint: string; fetch: typeof fetch } | undefined;
  app.on('certificate-error', (event, _contents, url, _error, certificate, callback) => {
    const own = {
      base: localBaseOf(ctx.host),
      fingerprint: ctx.host?.authTls ? ctx.host.fingerprint : undefined,
    };
    if (!acceptsCertificate({ url, certificatePem: certificate.data }, own)) return;
    event.preventDefault();
    callback(true);
  });
  return () => {
    const fingerprint = ctx.host?.authTls ? ctx.host.fingerprint : undefined;
    if (fingerprint === undefined) return undefined;
    if (pinned?.fingerprint !== fingerprint)
      pinned = { fingerprint, fetch: pinnedFetch(fingerprint) };
    return pinned.fetch;
  };
}

/**
 * Pairing requests: one notification each, with Approve / Deny where the system shows buttons
 * (macOS, Windows); a click opens the admin UI at the request.
 */
function watchPairings(ctx: TrayContext, openDashboard: (fragment?: string) => void) {
  const adminApi = createTrayAdminApi(
    () => localBaseOf(ctx.host),
    () => ctx.host?.adminToken ?? '',
    pinToOwnHost(ctx),
  );
  const notices = new Map<string, Notification>();
  const notify = (body: string): void => {
    if (Notification.isSupported()) new Notification({ title: 'sync-host', body }).show();
  };
  const choose = (choice: PairingChoice, notice: PairingNotice): void => {
    runPairingChoice(choice, notice, { api: adminApi, openDashboard }).then(
      (line) => {
        if (line !== undefined) notify(line);
      },
      (err: unknown) =>
        notify(`${notice.code}: ${err instanceof Error ? err.message : String(err)}`),
    );
  };
  return createPairingWatch({
    api: adminApi,
    onNew: (notice) => {
      if (!Notification.isSupported()) return;
      const shown = new Notification({
        title: notice.title,
        body: notice.body,
        actions: notice.actions.map((a) => ({ type: 'button', text: a.label })),
      });
      shown.on('click', () => openDashboard(notice.fragment));
      shown.on('action', (details) => {
        const action = notice.actions[details.actionIndex];
        if (action) choose(action.choice, notice);
      });
      shown.on('close', () => notices.delete(notice.code));
      notices.set(notice.code, shown);
      shown.show();
    },
    onGone: (code) => {
      notices.get(code)?.close();
      notices.delete(code);
    },
    // the watch tells a failure once per run, not every interval while the database is down
    onError: (err) =>
      ctx.logger.warn(
        { err: err instanceof Error ? err.message : String(err) },
        'tray: cannot list pairings',
      ),
  });
}

/** The admin token for the dashboard page, a second start, and the quit (the host closed first). */
function handleLifecycle(
  ctx: TrayContext,
  pairingWatch: PairingWatch,
  openDashboard: () => void,
): void {
  // The token goes to the dashboard page only, on request, never through a URL.
  ipcMain.handle('sync-host:admin-token', (event) => {
    const url = event.senderFrame?.url ?? '';
    if (!ctx.host || !url.startsWith(`${localBaseOf(ctx.host)}/admin/`)) return '';
    return ctx.host.adminToken;
  });

  app.on('second-instance', () => openDashboard());
  app.on('window-all-closed', () => {
    // A tray app: keep running without windows.
  });
  app.on('before-quit', (event) => {
    if (!ctx.host) return;
    event.preventDefault();
    ctx.quitting = true;
    const closing = ctx.host;
    ctx.host = undefined;
    pairingWatch.stop();
    const force = setTimeout(() => app.exit(1), 5_000);
    closing.close().then(
      () => {
        clearTimeout(force);
        app.exit(0);
      },
      () => app.exit(1),
    );
  });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => app.quit());
}

/** The tray icon, then the host on its configuration; a host that cannot start is a dialog. */
async function startInTray(
  ctx: TrayContext,
  parts: { refresh(): void; openDashboard(): void; pairingWatch: PairingWatch },
): Promise<void> {
  const { refresh, openDashboard, pairingWatch } = parts;
  const { logger } = ctx;
  const icon = nativeImage.createFromPath(
    join(
      appRoot,
      'build',
      'icons',
      process.platform === 'darwin' ? 'trayTemplate.png' : 'tray.png',
    ),
  );
  ctx.tray = new Tray(icon);
  ctx.tray.on('click', () => openDashboard());
  refresh();
  try {
    process.umask(0o077);
    const configDir = configDirArg(args) ?? process.env.SYNC_HOST_CWD ?? app.getPath('userData');
    const config = loadConfig(configDir);
    ctx.host = await startHost({
      mode: 'headless',
      config,
      logger,
      print: (line) => process.stdout.write(`${line}\n`),
      mount: createAdminMount({
        logger,
        defaultTier: config.auth.defaultTier,
        ui: {
          distDir: join(appRoot, 'dist', 'renderer'),
          sourceDir: app.isPackaged ? false : join(appRoot, 'renderer'),
        },
      }),
    });
    setInterval(refresh, 2_000).unref();
    if (ctx.host.auth) pairingWatch.start();
    refresh();
  } catch (err: unknown) {
    ctx.state = {
      ...ctx.state,
      phase: 'failed',
      error: err instanceof Error ? err.message : String(err),
    };
    refresh();
    dialog.showErrorBox('sync-host could not start', ctx.state.error ?? '');
  }
}
