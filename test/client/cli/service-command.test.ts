import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execWord, systemdUnitName } from '../../../client/cli/systemd-unit.ts';
import { createCliRunner } from '../../helpers/cli-process.ts';
import { startTestHost, type TestHost } from '../../helpers/host.ts';
import { tempDirMaker } from '../../helpers/temp-dirs.ts';

const tempDir = tempDirMaker('sync-service-');

const xdg = tempDir();
const { cli } = createCliRunner({ env: { XDG_CONFIG_HOME: xdg } });
const unitFolder = join(xdg, 'systemd', 'user');
const launcher = resolve(import.meta.dirname, '../../../bin/sync-host');

/** The `key=value` directives of a unit, in order (comments, sections and blanks left out). */
function directives(text: string): string[] {
  return text
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#') && !line.startsWith('['))
    .map((line) => line.slice(0, line.indexOf('=')));
}

const expectedDirectives = [
  'Description',
  'After',
  'Wants',
  'Type',
  'Environment',
  'ExecStart',
  'Restart',
  'RestartSec',
  'RestartPreventExitStatus',
  'UMask',
  'WantedBy',
];

describe.skipIf(process.platform !== 'linux')('sync-host service install and remove', () => {
  let th: TestHost;
  const config = tempDir();

  beforeAll(async () => {
    th = await startTestHost({ ui: false });
    const { deviceToken } = await th.signIn('service@example.org', 'server');
    expect((await cli(['login', '--auth', th.base, '--token', deviceToken], config)).code).toBe(0);
  });

  afterAll(async () => {
    await th?.close();
  });

  it('writes a user unit running sync with this copy of sync-host and prints how to start it', async () => {
    const folder = tempDir();
    const secret = join(tempDir(), 'passphrase');
    writeFileSync(secret, 'the passphrase\n', { mode: 0o600 });
    const res = await cli(
      ['service', 'install', 'notes', folder, '--encrypt', '--passphrase-file', secret],
      config,
    );
    expect(res).toMatchObject({ code: 0, stderr: '' });
    const path = join(unitFolder, 'sync-host-notes.service');
    expect(res.stdout).toContain(`Wrote ${path}`);
    expect(res.stdout).toContain('  systemctl --user daemon-reload\n');
    expect(res.stdout).toContain('  systemctl --user enable --now sync-host-notes.service\n');
    const unit = readFileSync(path, 'utf8');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(directives(unit)).toEqual(expectedDirectives);
    expect(unit).toContain(`\nEnvironment="SYNC_HOST_CONFIG_DIR=${config}"\n`);
    expect(unit).toContain(
      `\nExecStart="${process.execPath}" "${launcher}" "sync" "notes" "${folder}" "--auth" "${th.base}" "--encrypt" "--passphrase-file" "${secret}"\n`,
    );
    expect(unit).toContain('\nRestart=on-failure\n');
    // Not restarted after a command-line mistake (2) or once the device was removed (3).
    expect(unit).toContain('\nRestartPreventExitStatus=2 3\n');
    expect(unit).toContain('\nWantedBy=default.target\n');

    const removed = await cli(['service', 'remove', 'notes'], config);
    expect(removed.code).toBe(0);
    expect(existsSync(path)).toBe(false);
    const again = await cli(['service', 'remove', 'notes'], config);
    expect(again.code).toBe(1);
    expect(again.stderr.trim().split('\n')).toHaveLength(1);
  }, 60_000);

  it('cannot be made to add a line or a directive by a project key or a folder name', async () => {
    const key = 'x\n[Service]\nExecStartPre=/bin/sh -c "touch %h/pwned $HOME"\\';
    const folder = join(tempDir(), 'odd\nExecStopPost=/bin/false "%i$USER');
    const res = await cli(['service', 'install', key, folder], config);
    expect(res).toMatchObject({ code: 0, stderr: '' });
    const name = systemdUnitName(key)!;
    expect(name).toMatch(/^sync-host-x\\x0a\\x5bService\\x5d\\x0aExecStartPre/);
    expect(res.stdout).toContain(`systemctl --user enable --now '${name}'`);
    const unit = readFileSync(join(unitFolder, name), 'utf8');
    expect(directives(unit)).toEqual(expectedDirectives);
    const execStart = unit.split('\n').find((line) => line.startsWith('ExecStart='))!;
    expect(execStart).toContain(
      ' "x\\x0a[Service]\\x0aExecStartPre=/bin/sh -c \\"touch %%h/pwned $$HOME\\"\\\\" ',
    );
    expect(execStart).toContain('odd\\x0aExecStopPost=/bin/false \\"%%i$$USER"');
  }, 60_000);

  it('refuses --encrypt without a passphrase file, and a passphrase file others may read', async () => {
    const noFile = await cli(['service', 'install', 'notes', tempDir(), '--encrypt'], config);
    expect(noFile.code).toBe(2);
    expect(noFile.stderr).toContain('--encrypt needs --passphrase-file');
    const open = join(tempDir(), 'open');
    writeFileSync(open, 'secret\n', { mode: 0o640 });
    const readable = await cli(
      ['service', 'install', 'notes', tempDir(), '--encrypt', '--passphrase-file', open],
      config,
    );
    expect(readable.code).toBe(2);
    expect(readable.stderr).toContain('(mode 0640)');
    expect(existsSync(join(unitFolder, 'sync-host-notes.service'))).toBe(false);
  }, 60_000);
});

describe('systemd unit words', () => {
  it('quotes every word and escapes specifiers, variables, quotes, backslashes and controls', () => {
    expect(execWord('/usr/bin/node')).toBe('"/usr/bin/node"');
    expect(execWord('a b')).toBe('"a b"');
    expect(execWord('100%$PATH')).toBe('"100%%$$PATH"');
    expect(execWord('say "hi"\\')).toBe('"say \\"hi\\"\\\\"');
    expect(execWord('tab\there\u007f')).toBe('"tab\\x09here\\x7f"');
    expect(() => execWord(';')).toThrow(RangeError);
  });

  it('names a unit after its project key, escaping what a unit name cannot hold', () => {
    expect(systemdUnitName('notes')).toBe('sync-host-notes.service');
    expect(systemdUnitName('my notes/2024@home')).toBe(
      'sync-host-my\\x20notes\\x2f2024\\x40home.service',
    );
    expect(systemdUnitName('Grüße')).toBe('sync-host-Gr\\xc3\\xbc\\xc3\\x9fe.service');
    // Distinct keys, distinct units: a backslash is escaped too.
    expect(systemdUnitName('a\\x20')).not.toBe(systemdUnitName('a '));
    expect(systemdUnitName('k'.repeat(300))).toBeUndefined();
  });
});
