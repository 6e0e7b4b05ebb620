// Runs inside a private network namespace (see first-start.test.ts), where the default ports
// 8445/8443/8444 are free: `sync-host --headless` in an empty folder, exactly as a fresh install
// (TLS with a self-signed certificate, reached here pinned to the fingerprint the host prints).
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pinnedFetch } from '../../client/pinning.ts';

const root = join(import.meta.dirname, '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'sync-host-first-'));
const child = spawn(process.execPath, [join(root, 'bin', 'sync-host'), '--headless'], { cwd: dir });
let stdout = '';
let stderr = '';
child.stdout.on('data', (d: Buffer) => {
  stdout += d.toString();
});
child.stderr.on('data', (d: Buffer) => {
  stderr += d.toString();
});
const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));

const until = Date.now() + 20_000;
while (!/^admin: .*\n/m.test(stdout) && Date.now() < until && child.exitCode === null) {
  await new Promise((r) => setTimeout(r, 50));
}
const adminUrl = /^admin:\s+(\S+)$/m.exec(stdout)?.[1] ?? '';
const token = new URL(adminUrl || 'http://x/').hash.replace(/^#token=/, '');
const base = adminUrl.replace(/\/admin\/#.*$/, '');
const fingerprint = /^certificate: .* \(sha256 (\S+)\)$/m.exec(stdout)?.[1] ?? '';
const fetch = pinnedFetch(fingerprint);
const page = adminUrl ? await fetch(`${base}/admin/`) : undefined;
const api = adminUrl
  ? await fetch(`${base}/admin/api/connection`, { headers: { Authorization: `Bearer ${token}` } })
  : undefined;
const health = adminUrl ? await fetch(`${base}/health`) : undefined;
// Every entry of the data folder, folders (named with a trailing /) and what they hold too.
const modes = Object.fromEntries(
  readdirSync(join(dir, 'data'), { recursive: true, encoding: 'utf8' }).map((f) => {
    const stat = statSync(join(dir, 'data', f));
    return [stat.isDirectory() ? `${f}/` : f, (stat.mode & 0o777).toString(8)];
  }),
);
const dataDirMode = (statSync(join(dir, 'data')).mode & 0o777).toString(8);
const stopAt = Date.now();
child.kill('SIGTERM');
const code = await exited;
const stopMs = Date.now() - stopAt;
rmSync(dir, { recursive: true, force: true });

process.stdout.write(
  `${JSON.stringify({
    stdout,
    stderr,
    adminUrl,
    token,
    fingerprint,
    pageStatus: page?.status,
    pageType: page?.headers.get('content-type'),
    connection: api ? await api.json() : undefined,
    health: health?.status,
    modes,
    dataDirMode,
    code,
    stopMs,
  })}\n`,
);
