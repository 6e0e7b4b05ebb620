import { shortFingerprint } from '../protocol/fingerprint.ts';

/**
 * The tray's state, menu and texts as plain data: no Electron import, so it is unit tested
 * without Electron. main.ts turns `trayMenu()` into a native menu and runs the actions.
 */

/** What the tray shows; derived from the host by `trayStateOf`. */
export interface TrayState {
  /** `starting` until the host is up; `failed` when it could not start (see `error`). */
  phase: 'starting' | 'running' | 'failed';
  relay: 'running' | 'paused' | 'absent';
  connections: number;
  rooms: number;
  authUrl: string;
  relayUrl: string;
  /** The certificate's fingerprint (base64url) when the host speaks TLS: devices pin it. */
  fingerprint?: string;
  openAtLogin: boolean;
  error?: string;
}

export type TrayAction =
  | 'open-dashboard'
  | 'pair-device'
  | 'copy-connection'
  | 'pause-relay'
  | 'resume-relay'
  | 'toggle-open-at-login'
  | 'quit';

export interface TrayMenuItem {
  label: string;
  type: 'normal' | 'separator' | 'checkbox';
  enabled: boolean;
  checked?: boolean;
  action?: TrayAction;
}

/** The host as the tray sees it (a subset of server/host.ts's Host). */
export interface TrayHostView {
  urls: { auth?: string; relay?: string };
  fingerprint?: string;
  relayPaused: boolean;
  relay?: { status(): { connections: number; rooms: number } };
}

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/** The first, disabled line of the menu (and the tooltip). */
export function statusLine(state: TrayState): string {
  if (state.phase === 'starting') return 'sync-host: starting…';
  if (state.phase === 'failed')
    return `sync-host: not running (${state.error ?? 'failed to start'})`;
  if (state.relay === 'paused') return 'sync-host: relay paused';
  if (state.relay === 'absent') return 'sync-host: auth service only';
  return `sync-host: ${plural(state.connections, 'connection', 'connections')} in ${plural(state.rooms, 'room', 'rooms')}`;
}

/** The tray menu, top to bottom. */
export function trayMenu(state: TrayState): TrayMenuItem[] {
  const running = state.phase === 'running';
  const relayItem: TrayMenuItem =
    state.relay === 'paused'
      ? { label: 'Resume relay', type: 'normal', enabled: running, action: 'resume-relay' }
      : {
          label: 'Pause relay',
          type: 'normal',
          enabled: running && state.relay === 'running',
          action: 'pause-relay',
        };
  return [
    { label: statusLine(state), type: 'normal', enabled: false },
    { label: '', type: 'separator', enabled: true },
    { label: 'Open dashboard', type: 'normal', enabled: running, action: 'open-dashboard' },
    {
      label: 'Pair a device',
      type: 'normal',
      enabled: running && state.authUrl !== '',
      action: 'pair-device',
    },
    {
      label: 'Copy connection details',
      type: 'normal',
      enabled: running,
      action: 'copy-connection',
    },
    relayItem,
    ...(state.fingerprint === undefined
      ? []
      : [
          {
            label: `Certificate: ${shortFingerprint(state.fingerprint)}`,
            type: 'normal',
            enabled: false,
          } satisfies TrayMenuItem,
        ]),
    { label: '', type: 'separator', enabled: true },
    {
      label: 'Open at login',
      type: 'checkbox',
      enabled: true,
      checked: state.openAtLogin,
      action: 'toggle-open-at-login',
    },
    { label: 'Quit sync-host', type: 'normal', enabled: true, action: 'quit' },
  ];
}

/** What "Copy connection details" puts on the clipboard: the client settings, ready to paste. */
export function connectionDetails(
  state: Pick<TrayState, 'authUrl' | 'relayUrl' | 'fingerprint'>,
): string {
  const pin = state.fingerprint === undefined ? '' : `fingerprint: ${state.fingerprint}\n`;
  return `syncAuthUrl: ${state.authUrl}\nsyncRelayUrl: ${state.relayUrl}\n${pin}`;
}

/** The tray state of a running host. */
export function trayStateOf(host: TrayHostView, openAtLogin: boolean): TrayState {
  const status = host.relay?.status();
  return {
    phase: 'running',
    relay: host.relay ? 'running' : host.relayPaused ? 'paused' : 'absent',
    connections: status?.connections ?? 0,
    rooms: status?.rooms ?? 0,
    authUrl: host.urls.auth ?? '',
    relayUrl: host.urls.relay ?? '',
    ...(host.fingerprint === undefined ? {} : { fingerprint: host.fingerprint }),
    openAtLogin,
  };
}

/** What the actions need from Electron and the host; main.ts passes the real ones, tests fakes. */
export interface TrayActionDeps {
  pauseRelay(): Promise<void>;
  resumeRelay(): Promise<void>;
  writeClipboard(text: string): void;
  /** Opens (or shows) the admin UI, at `fragment` when given (`pairings`, `pair=<code>`). */
  openDashboard(fragment?: string): void;
  setOpenAtLogin(on: boolean): void;
  quit(): void;
}

/** Runs a menu action against the current state. */
export async function runTrayAction(
  action: TrayAction,
  state: TrayState,
  deps: TrayActionDeps,
): Promise<void> {
  switch (action) {
    case 'open-dashboard':
      deps.openDashboard();
      return;
    case 'pair-device':
      // The admin UI's pairing section: requests waiting, and the QR code of the auth URL.
      deps.openDashboard('pairings');
      return;
    case 'copy-connection':
      deps.writeClipboard(connectionDetails(state));
      return;
    case 'pause-relay':
      await deps.pauseRelay();
      return;
    case 'resume-relay':
      await deps.resumeRelay();
      return;
    case 'toggle-open-at-login':
      deps.setOpenAtLogin(!state.openAtLogin);
      return;
    case 'quit':
      deps.quit();
      return;
  }
}
