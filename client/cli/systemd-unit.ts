/**
 * A systemd user unit that runs `sync-host sync` (written by `sync-host service install`).
 * Everything that comes from the command line (project key, folder, paths) is escaped for the
 * unit file's syntax, so that no value can end a line or add a directive.
 */

/** The longest unit name systemd accepts, in bytes. */
const maxUnitNameBytes = 255;
const unitPrefix = 'sync-host-';
const unitSuffix = '.service';

/** Characters a unit name may hold as they are (besides `\`, which introduces an escape). */
const plainUnitChar = /^[A-Za-z0-9:_.-]$/;

/**
 * The unit of a project: `sync-host-<key>.service`, every character of the key outside
 * `A-Z a-z 0-9 : _ . -` written as `\xNN` per UTF-8 byte (as `systemd-escape` does), so that
 * two keys never share a unit. Undefined when the name would be longer than systemd allows.
 */
export function systemdUnitName(projectKey: string): string | undefined {
  let escaped = '';
  for (const char of projectKey) {
    if (plainUnitChar.test(char)) {
      escaped += char;
      continue;
    }
    for (const byte of Buffer.from(char, 'utf8')) {
      escaped += `\\x${byte.toString(16).padStart(2, '0')}`;
    }
  }
  const name = `${unitPrefix}${escaped}${unitSuffix}`;
  return Buffer.byteLength(name) <= maxUnitNameBytes ? name : undefined;
}

/** C0 controls and DEL as `\xNN` (systemd's C escapes); `\` and `"` escaped for a quoted word. */
function escapeQuoted(value: string): string {
  let out = '';
  for (const char of value) {
    const code = char.codePointAt(0)!;
    if (code <= 0x1f || code === 0x7f) out += `\\x${code.toString(16).padStart(2, '0')}`;
    else if (char === '\\' || char === '"') out += `\\${char}`;
    else out += char;
  }
  return out;
}

/**
 * One word of `ExecStart=`, double-quoted: `%` (specifiers) doubled, `$` (variable expansion)
 * doubled, controls, `\` and `"` escaped. Throws for a lone `;`, which systemd would read as a
 * command separator.
 */
export function execWord(value: string): string {
  if (value === ';') throw new RangeError('a lone ";" cannot be an argument in a systemd unit');
  return `"${escapeQuoted(value).replaceAll('%', '%%').replaceAll('$', '$$$$')}"`;
}

/** `Environment="NAME=value"`, the value escaped (`%` doubled; no `$` expansion there). */
function environmentLine(name: string, value: string): string {
  return `Environment="${name}=${escapeQuoted(value).replaceAll('%', '%%')}"`;
}

export interface SyncUnitOptions {
  /** The unit's name (`systemdUnitName`): its escaped key goes in the description. */
  unitName: string;
  /** The credentials' folder, absolute: `SYNC_HOST_CONFIG_DIR`. */
  configDir: string;
  /** The command: node, the launcher, then `sync <key> <dir> ...` (paths absolute). */
  command: string[];
}

/** The unit file's text. */
export function syncUnit(options: SyncUnitOptions): string {
  const key = options.unitName.slice(unitPrefix.length, -unitSuffix.length);
  return [
    '# Written by sync-host service install; removed by sync-host service remove.',
    '[Unit]',
    `Description=sync-host sync of project ${key.replaceAll('%', '%%')}`,
    'After=network-online.target',
    'Wants=network-online.target',
    '',
    '[Service]',
    'Type=simple',
    environmentLine('SYNC_HOST_CONFIG_DIR', options.configDir),
    `ExecStart=${options.command.map(execWord).join(' ')}`,
    // Exit 1 (relay or host unreachable at start...) is retried; exit 2 is a mistake on the
    // command line (a passphrase file others may read...) and exit 3 a device that may no
    // longer join (removed or revoked): a retry cannot fix either.
    'Restart=on-failure',
    'RestartSec=30',
    'RestartPreventExitStatus=2 3',
    'UMask=0077',
    '',
    '[Install]',
    'WantedBy=default.target',
    '',
  ].join('\n');
}
