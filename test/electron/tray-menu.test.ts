import { afterEach, describe, expect, it } from 'vitest';
import {
  autostartDesktopEntry,
  configDirArg,
  isCliInvocation,
  userArgs,
} from '../../electron/args.ts';
import {
  connectionDetails,
  runTrayAction,
  statusLine,
  type TrayAction,
  type TrayState,
  trayMenu,
  trayStateOf,
} from '../../electron/tray-menu.ts';
import { startTestHost, type TestHost } from '../helpers/host.ts';

const running: TrayState = {
  phase: 'running',
  relay: 'running',
  connections: 3,
  rooms: 2,
  authUrl: 'http://192.168.1.5:8445',
  relayUrl: 'ws://192.168.1.5:8443',
  openAtLogin: false,
};

describe('tray status line', () => {
  it('counts connections and rooms, with singulars', () => {
    expect(statusLine(running)).toBe('sync-host: 3 connections in 2 rooms');
    expect(statusLine({ ...running, connections: 1, rooms: 1 })).toBe(
      'sync-host: 1 connection in 1 room',
    );
    expect(statusLine({ ...running, connections: 0, rooms: 0 })).toBe(
      'sync-host: 0 connections in 0 rooms',
    );
  });

  it('says when the host is starting, failed, or the relay is paused', () => {
    expect(statusLine({ ...running, phase: 'starting' })).toBe('sync-host: starting…');
    expect(statusLine({ ...running, phase: 'failed', error: 'port 8445 is already in use' })).toBe(
      'sync-host: not running (port 8445 is already in use)',
    );
    expect(statusLine({ ...running, relay: 'paused' })).toBe('sync-host: relay paused');
  });
});

describe('tray menu', () => {
  it('lists status, Open dashboard, Pair a device, Copy connection details, Pause relay, Open at login and Quit', () => {
    const menu = trayMenu(running);
    expect(menu.filter((i) => i.type !== 'separator').map((i) => i.label)).toEqual([
      'sync-host: 3 connections in 2 rooms',
      'Open dashboard',
      'Pair a device',
      'Copy connection details',
      'Pause relay',
      'Open at login',
      'Quit sync-host',
    ]);
    expect(menu[0]?.enabled).toBe(false);
    expect(menu.find((i) => i.label === 'Open at login')).toMatchObject({
      type: 'checkbox',
      checked: false,
    });
  });

  it('offers Pair a device only where an auth service runs (not in relay mode)', () => {
    const pairItem = (state: TrayState) => trayMenu(state).find((i) => i.action === 'pair-device');
    expect(pairItem(running)?.enabled).toBe(true);
    expect(pairItem({ ...running, authUrl: '' })?.enabled).toBe(false);
    expect(pairItem({ ...running, phase: 'starting' })?.enabled).toBe(false);
  });

  it('offers Resume when paused, and only Quit and Open at login before the host runs', () => {
    expect(
      trayMenu({ ...running, relay: 'paused' }).find((i) => i.action === 'resume-relay')?.label,
    ).toBe('Resume relay');
    const starting = trayMenu({ ...running, phase: 'starting' });
    expect(starting.filter((i) => i.enabled && i.action).map((i) => i.action)).toEqual([
      'toggle-open-at-login',
      'quit',
    ]);
  });

  it('copies the client settings', () => {
    expect(connectionDetails(running)).toBe(
      'syncAuthUrl: http://192.168.1.5:8445\nsyncRelayUrl: ws://192.168.1.5:8443\n',
    );
  });
});

describe('tray actions on a real host', () => {
  let th: TestHost | undefined;
  afterEach(async () => {
    await th?.close();
    th = undefined;
  });

  it('pauses and resumes the relay, copies details, toggles login, opens (the pairing section too) and quits', async () => {
    th = await startTestHost({ ui: false });
    const host = th.host;
    const calls: string[] = [];
    const deps = {
      pauseRelay: () => host.pauseRelay(),
      resumeRelay: () => host.resumeRelay(),
      writeClipboard: (text: string) => calls.push(`clipboard ${text}`),
      openDashboard: (fragment?: string) => calls.push(`dashboard ${fragment ?? ''}`),
      setOpenAtLogin: (on: boolean) => calls.push(`login ${on}`),
      quit: () => calls.push('quit'),
    };
    let state = trayStateOf(host, false);
    expect(state).toMatchObject({
      phase: 'running',
      relay: 'running',
      connections: 0,
      authUrl: th.base,
      relayUrl: th.relayUrl,
    });

    await runTrayAction('pause-relay', state, deps);
    state = trayStateOf(host, false);
    expect(state.relay).toBe('paused');
    expect(trayMenu(state).some((i) => i.action === 'resume-relay')).toBe(true);
    await runTrayAction('resume-relay', state, deps);
    expect(trayStateOf(host, false).relay).toBe('running');

    for (const action of [
      'copy-connection',
      'toggle-open-at-login',
      'open-dashboard',
      'pair-device',
      'quit',
    ] as TrayAction[]) {
      await runTrayAction(action, state, deps);
    }
    expect(calls).toEqual([
      `clipboard ${connectionDetails(state)}`,
      'login true',
      'dashboard ',
      'dashboard pairings',
      'quit',
    ]);
  });
});

describe('Electron command line', () => {
  it('runs the CLI for --headless and the other modes, the tray otherwise', () => {
    expect(userArgs(['/opt/SyncHost/synchost', '--headless'], true)).toEqual(['--headless']);
    expect(userArgs(['/usr/bin/electron', '/repo', 'serve'], false)).toEqual(['serve']);
    expect(
      userArgs(
        [
          '/usr/bin/electron',
          '--inspect=0',
          '--remote-debugging-port=0',
          '--no-sandbox',
          '/repo',
          '--config-dir',
          '/x',
        ],
        false,
      ),
    ).toEqual(['--config-dir', '/x']);
    expect(userArgs(['/opt/SyncHost/SyncHost', '--no-sandbox'], true)).toEqual([]);
    expect(isCliInvocation(['--headless'])).toBe(true);
    expect(isCliInvocation(['discover'])).toBe(true);
    expect(isCliInvocation(['--version'])).toBe(true);
    expect(isCliInvocation([])).toBe(false);
    expect(isCliInvocation(['--config-dir', '/srv'])).toBe(false);
    expect(configDirArg(['--config-dir', '/srv/sync'])).toBe('/srv/sync');
    expect(configDirArg(['--config-dir=/srv/x'])).toBe('/srv/x');
  });

  it('writes an XDG autostart entry that quotes the paths', () => {
    const entry = autostartDesktopEntry('/opt/Sync Host/synchost');
    expect(entry).toContain('Exec="/opt/Sync Host/synchost"\n');
    expect(entry.startsWith('[Desktop Entry]\nType=Application\n')).toBe(true);
    expect(autostartDesktopEntry('/usr/bin/electron', '/home/a/sync-host')).toContain(
      'Exec="/usr/bin/electron" "/home/a/sync-host"',
    );
  });
});
