// `npm run build:deb`: dist/sync-host_<version>_<arch>.deb, the headless host for a NAS or
// server (dpkg-deb; no Electron): the single executable in /usr/bin, a `sync-host` system user,
// /var/lib/sync-host as its data folder, /etc/sync-host/auth.conf and the systemd unit.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { repoRoot } from './electron-bundle.ts';
import { buildExecutable } from './sea.ts';

const packageJson = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
  version: string;
  description: string;
};
const maintainer = 'sync-host contributors <sync-host@users.noreply.github.com>';

/** Debian's name of this machine's architecture (the executable is this node's). */
const debArch: Record<string, string> = { x64: 'amd64', arm64: 'arm64', arm: 'armhf' };

/** The unit of build/sync-host.service, running the installed executable. */
export function debUnit(root = repoRoot): string {
  const unit = readFileSync(join(root, 'build', 'sync-host.service'), 'utf8');
  return unit
    .replace(
      /^# Install:[\s\S]*?^\[Unit\]/m,
      '# Installed by the sync-host package; settings in /etc/sync-host/auth.conf.\n[Unit]',
    )
    .replace(/^Documentation=.*$/m, 'Documentation=file:///usr/share/doc/sync-host/nas.md.gz')
    .replace(
      /^ExecStart=.*$/m,
      'ExecStart=/usr/bin/sync-host --headless --config-dir /etc/sync-host',
    );
}

/** The auth.conf the package installs (a conffile: an edited copy survives upgrades). */
const authConf = `# sync-host: every key with its default is in /usr/share/doc/sync-host/configuration.md.gz
# This file may hold SMTP and database passwords: mode 0640, group sync-host.
# \`sudo -u sync-host sync-host config check --config-dir /etc/sync-host\` shows what runs.

# Data folder: SQLite databases, the shared secret and the admin token (all mode 0600).
DATA_DIR=/var/lib/sync-host
# mDNS advertising on the LAN (the admin URL is in \`journalctl -u sync-host\` after the start).
MDNS=on
`;

const postinst = `#!/bin/sh
set -e
if [ "$1" = configure ]; then
  if ! getent passwd sync-host >/dev/null; then
    adduser --system --group --home /var/lib/sync-host --no-create-home --quiet sync-host
  fi
  install -d -o sync-host -g sync-host -m 0700 /var/lib/sync-host
  chgrp sync-host /etc/sync-host/auth.conf
  chmod 0640 /etc/sync-host/auth.conf
fi
if [ -d /run/systemd/system ]; then
  systemctl --system daemon-reload >/dev/null || true
  deb-systemd-helper enable sync-host.service >/dev/null || true
  deb-systemd-invoke restart sync-host.service >/dev/null || true
fi
`;

const prerm = `#!/bin/sh
set -e
if [ -d /run/systemd/system ] && [ "$1" = remove ]; then
  deb-systemd-invoke stop sync-host.service >/dev/null || true
fi
`;

const postrm = `#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
  systemctl --system daemon-reload >/dev/null || true
fi
if [ "$1" = purge ]; then
  deb-systemd-helper purge sync-host.service >/dev/null || true
  rm -rf /var/lib/sync-host
  if getent passwd sync-host >/dev/null; then deluser --system --quiet sync-host || true; fi
fi
`;

const copyright = `Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: sync-host

Files: *
Copyright: 2025-2026 sync-host contributors
License: Expat
 Permission is hereby granted, free of charge, to any person obtaining a copy
 of this software and associated documentation files (the "Software"), to deal
 in the Software without restriction, including without limitation the rights
 to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
 copies of the Software, and to permit persons to whom the Software is
 furnished to do so, subject to the following conditions:
 .
 The above copyright notice and this permission notice shall be included in
 all copies or substantial portions of the Software.
 .
 THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
 IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
 FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
 AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
 LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
 OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN
 THE SOFTWARE.
`;

/**
 * What lintian reports about the package that is so on purpose: the executable is Node's own
 * binary (its zlib and its build flags), and auth.conf may hold passwords.
 */
const lintianOverrides = `# The executable is Node's released binary with the program inside (single executable application).
sync-host: embedded-library zlib [usr/bin/sync-host]
sync-host: hardening-no-pie [usr/bin/sync-host]
# auth.conf may hold SMTP and database passwords: readable by root and the sync-host group only.
sync-host: non-standard-file-perm 0640 != 0644 [etc/sync-host/auth.conf]
`;

/** A short manual page: what the program is and where the rest is. */
function manPage(): string {
  return `.TH SYNC-HOST 1 "" "sync-host ${packageJson.version}" "User Commands"
.SH NAME
sync-host \\- self-hosted local-first sync host: auth service, relay and client
.SH SYNOPSIS
.B sync-host
[\\fB\\-\\-headless\\fR | \\fBauth\\fR | \\fBrelay\\fR | \\fIclient command\\fR] [\\fB\\-\\-config\\-dir\\fR \\fIDIR\\fR]
.SH DESCRIPTION
Runs the magic-link auth service and the WebSocket relay (\\fB\\-\\-headless\\fR), one of them,
or a client command (login, projects, sync...). \\fBsync-host \\-\\-help\\fR lists them all.
The package runs the host as the systemd service \\fBsync-host\\fR with the settings of
\\fI/etc/sync-host/auth.conf\\fR and its data in \\fI/var/lib/sync-host\\fR.
.SH SEE ALSO
/usr/share/doc/sync-host/nas.md.gz, /usr/share/doc/sync-host/configuration.md.gz
`;
}

function write(path: string, text: string | Buffer, mode = 0o644): void {
  mkdirSync(join(path, '..'), { recursive: true, mode: 0o755 });
  writeFileSync(path, text);
  chmodSync(path, mode);
}

/**
 * Lays out the package tree in `tree` around `executable` and builds the .deb into `outDir` with
 * dpkg-deb (as root:root, without fakeroot). Returns the .deb's path.
 */
export function buildDeb(
  executable: string,
  tree = join(repoRoot, 'dist', 'deb'),
  outDir = join(repoRoot, 'dist'),
  root = repoRoot,
): string {
  const arch = debArch[process.arch];
  if (arch === undefined) throw new Error(`no Debian architecture for ${process.arch}`);
  rmSync(tree, { recursive: true, force: true });
  mkdirSync(tree, { recursive: true, mode: 0o755 });
  const doc = join(tree, 'usr', 'share', 'doc', 'sync-host');
  write(join(tree, 'usr', 'bin', 'sync-host'), readFileSync(executable), 0o755);
  write(join(tree, 'lib', 'systemd', 'system', 'sync-host.service'), debUnit(root));
  write(join(tree, 'etc', 'sync-host', 'auth.conf'), authConf, 0o640);
  write(join(doc, 'copyright'), copyright);
  const date = new Date().toUTCString().replace('GMT', '+0000');
  write(
    join(doc, 'changelog.gz'),
    gzipSync(
      `sync-host (${packageJson.version}) unstable; urgency=medium\n\n  * Release ${packageJson.version}.\n\n -- ${maintainer}  ${date}\n`,
      { level: 9 },
    ),
  );
  write(join(tree, 'usr', 'share', 'lintian', 'overrides', 'sync-host'), lintianOverrides);
  write(
    join(tree, 'usr', 'share', 'man', 'man1', 'sync-host.1.gz'),
    gzipSync(manPage(), { level: 9 }),
  );
  for (const name of ['nas.md', 'configuration.md']) {
    write(join(doc, `${name}.gz`), gzipSync(readFileSync(join(root, 'docs', name)), { level: 9 }));
  }
  const debian = join(tree, 'DEBIAN');
  const installedKiB = Math.ceil(
    Number(execFileSync('du', ['-sk', '--exclude=DEBIAN', tree]).toString().split('\t')[0]),
  );
  write(
    join(debian, 'control'),
    [
      'Package: sync-host',
      `Version: ${packageJson.version}`,
      `Architecture: ${arch}`,
      `Maintainer: ${maintainer}`,
      `Installed-Size: ${installedKiB}`,
      'Depends: adduser, libc6 (>= 2.28), libstdc++6, libgcc-s1',
      'Section: net',
      'Priority: optional',
      'Description: self-hosted local-first sync host (headless)',
      ' Magic-link auth service and WebSocket relay in one program: devices sign in,',
      ' pair and keep documents and folders in step through the host. This package',
      ' runs it as the systemd service sync-host, with its data in /var/lib/sync-host',
      ' and its settings in /etc/sync-host.',
      '',
    ].join('\n'),
  );
  write(join(debian, 'conffiles'), '/etc/sync-host/auth.conf\n');
  write(join(debian, 'postinst'), postinst, 0o755);
  write(join(debian, 'prerm'), prerm, 0o755);
  write(join(debian, 'postrm'), postrm, 0o755);
  mkdirSync(outDir, { recursive: true });
  const deb = join(outDir, `sync-host_${packageJson.version}_${arch}.deb`);
  execFileSync('dpkg-deb', ['--root-owner-group', '-Zgzip', '--build', tree, deb], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return deb;
}

if (process.argv[1] === import.meta.filename) {
  process.stdout.write(`built ${buildDeb(await buildExecutable())}\n`);
}
