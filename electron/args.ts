/**
 * Command-line handling of the Electron app, without Electron: `SyncHost --headless` (and the
 * other CLI modes) runs the command line of program/main.ts instead of the tray.
 */

const cliWords = new Set([
  '--headless',
  'serve',
  'auth',
  'relay',
  'discover',
  '--help',
  '-h',
  '--version',
  '-v',
]);

/** Chromium and debugging switches that Electron or a test driver adds; not ours. */
const foreignSwitch =
  /^--(no-sandbox|inspect|remote-debugging-port|enable-logging|disable-gpu|ozone-platform)/;

/**
 * The user's arguments. Packaged: everything after the executable. Not packaged
 * (`electron [switches] <app path> args`): everything after the app path.
 */
export function userArgs(argv: readonly string[], isPackaged: boolean): string[] {
  let rest = argv.slice(1);
  if (!isPackaged) {
    const appPath = rest.findIndex((a) => !a.startsWith('-'));
    rest = appPath === -1 ? [] : rest.slice(appPath + 1);
  }
  return rest.filter((a) => !foreignSwitch.test(a));
}

/** Whether the arguments ask for a command-line mode rather than the tray app. */
export function isCliInvocation(args: readonly string[]): boolean {
  return args.some((a) => cliWords.has(a));
}

/** `--config-dir DIR` or `--config-dir=DIR` when given. */
export function configDirArg(args: readonly string[]): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const a = args[i] ?? '';
    if (a === '--config-dir') return args[i + 1];
    if (a.startsWith('--config-dir=')) return a.slice('--config-dir='.length);
  }
  return undefined;
}

/**
 * The XDG autostart entry for "Open at login" on Linux (Electron's login items cover macOS and
 * Windows only). Written to ~/.config/autostart/sync-host.desktop.
 */
export function autostartDesktopEntry(execPath: string, appPath?: string): string {
  const quote = (s: string) => `"${s.replace(/(["`$\\])/g, '\\$1')}"`;
  const exec = appPath === undefined ? quote(execPath) : `${quote(execPath)} ${quote(appPath)}`;
  return [
    '[Desktop Entry]',
    'Type=Application',
    'Name=sync-host',
    'Comment=Self-hosted sync host (tray)',
    `Exec=${exec}`,
    'X-GNOME-Autostart-enabled=true',
    '',
  ].join('\n');
}
