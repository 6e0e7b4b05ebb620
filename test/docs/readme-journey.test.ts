import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pinnedFetch } from '../../client/pinning.ts';
import { shortFingerprint } from '../../protocol/fingerprint.ts';
import { createCliRunner } from '../helpers/cli-process.ts';
import { writeConf } from '../helpers/configs.ts';
import { type HostProcess, startHostProcess } from '../helpers/host-process.ts';
import { processScope } from '../helpers/process-scope.ts';
import { treeWithoutNativeSqlite } from '../helpers/program-copy.ts';
import { eventually } from '../helpers/wait.ts';

/**
 * The README's first-run journey, step by step, on a copy of the program installed without the
 * native SQLite addon: `npm start`; the first machine signs in by pairing, approved as the admin
 * UI does it; the second by pairing approved from the first (`pair approve`); `project add` on
 * both, then messages both ways through the relay. Also the README's other way in: with an
 * e-mail on a host without SMTP, approved by the link the host prints. Nothing is copied by hand
 * but the code shown, as a person reads it off one screen onto the other, and the certificate's
 * fingerprint the host prints (the host speaks HTTPS and WSS with its self-signed certificate;
 * without a terminal to ask on, login takes it as --fingerprint).
 */

const readme = readFileSync(resolve(import.meta.dirname, '../../README.md'), 'utf8');
const email = 'me@example.org';
const { tempDir } = processScope('sync-host-journey-');
const tree = treeWithoutNativeSqlite(tempDir('sync-host-journey-tree-'));
const { spawnCli, cli, killAll } = createCliRunner({ launcher: join(tree, 'bin', 'sync-host') });
// Two machines: each its own credentials folder.
const first = tempDir('sync-host-journey-first-');
const second = tempDir('sync-host-journey-second-');
const third = tempDir('sync-host-journey-third-');

let host: HostProcess;
let authUrl: string;
let fingerprint: string;
/** Requests as a machine paired with the host makes them: pinned to its certificate. */
let fetch: typeof globalThis.fetch;
/** A README login command with the fingerprint a script passes, as the README shows it. */
function loginArgs(command: string, values: Record<string, string> = {}): string[] {
  expect(readme).toContain(
    'bin/sync-host login --auth https://<host>:8445 --fingerprint <fingerprint>',
  );
  return [...fromReadme(command, values), '--fingerprint', fingerprint];
}

/**
 * A `bin/sync-host …` command as the README writes it (it must be there, in a code span or
 * block), as arguments, with the README's placeholders filled in.
 */
function fromReadme(command: string, values: Record<string, string> = {}): string[] {
  expect(readme, `the README shows \`bin/sync-host ${command}\``).toContain(
    `bin/sync-host ${command}`,
  );
  let filled = command.replace('https://<host>:8445', authUrl);
  for (const [name, value] of Object.entries(values)) filled = filled.replace(`<${name}>`, value);
  return filled.split(' ');
}

afterAll(async () => {
  killAll();
  await host?.stop('SIGKILL').catch(() => null);
});

beforeAll(async () => {
  // `npm install && npm start`: npm start is bin/sync-host --headless in the program's folder,
  // on embedded SQLite with no config. The ports are the test's (ephemeral, loopback, no mDNS).
  expect(readme).toContain('npm install && npm start');
  const pkg = JSON.parse(readFileSync(join(tree, 'package.json'), 'utf8')) as {
    scripts: { start: string };
  };
  expect(pkg.scripts.start).toBe('node bin/sync-host --headless');
  writeConf(tree, 'auth.conf', { PORT: 0, BIND: '127.0.0.1', MDNS: 'off' });
  writeConf(tree, 'relay.conf', { 'ws.port': 0, 'status.port': 0 });
  host = await startHostProcess(['--headless'], tree, { launcher: join(tree, 'bin', 'sync-host') });
  authUrl = await host.url('auth');
  const certificate = await host.line('certificate: ');
  fingerprint = /\(sha256 ([\w-]{43})\)$/.exec(certificate)?.[1] ?? '';
  fetch = pinnedFetch(fingerprint);
}, 60_000);

describe('the README journey: npm start, two machines paired, one project, messages', () => {
  it('starts with the URLs printed; the first machine is approved as the admin UI does, the second by the first', async () => {
    expect(authUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(await host.url('relay')).toMatch(/^wss:\/\/127\.0\.0\.1:\d+$/);
    expect(fingerprint).toMatch(/^[\w-]{43}$/);
    const adminUrl = await host.url('admin');
    expect(adminUrl).toMatch(/\/admin\/#token=[0-9a-f]+$/);
    // Installed without better-sqlite3: the one warning names the engine that runs instead.
    expect(host.stderr.filter((l) => l.includes('SQLite engine: sql.js'))).toHaveLength(1);
    // Below the URLs, what to do next on each machine: the README's login command, to the
    // printed auth URL, and the two ways to approve it.
    const next = await host.line('Next, on each machine that should sync: ');
    expect(next).toBe(`Next, on each machine that should sync: sync-host login --auth ${authUrl}`);
    expect(next.slice(next.indexOf('sync-host ') + 'sync-host '.length).split(' ')).toEqual(
      fromReadme('login --auth https://<host>:8445'),
    );
    const approve = await host.line('  and approve ');
    expect(approve).toBe(
      '  and approve the code it shows in the admin UI, or with sync-host pair approve <code> on a machine already signed in',
    );
    const at = host.stdout.indexOf(next);
    expect(host.stdout.slice(at - 2, at + 2)).toEqual([
      `admin:  ${adminUrl}`,
      `certificate: ${shortFingerprint(fingerprint)} (sha256 ${fingerprint})`,
      next,
      approve,
    ]);
    expect(readme).toContain('bin/sync-host pair approve <code>');

    // The first machine pairs; in the admin UI (opened from the printed admin URL, which carries
    // its token) the request is approved for a typed e-mail: the UI's request, made here.
    const login = spawnCli(loginArgs('login --auth https://<host>:8445'), first);
    const code = await login.code();
    expect(login.out.stderr).toContain(`${authUrl}/admin/#pair=${code}`);
    const adminToken = new URLSearchParams(new URL(adminUrl).hash.slice(1)).get('token') ?? '';
    const approvedByAdmin = await fetch(`${authUrl}/admin/api/pairings/approve`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${adminToken}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ code, email }),
    });
    expect(approvedByAdmin.status).toBe(200);
    expect(await login.exited).toBe(0);
    expect(login.out.stderr).toContain('Approved by the host administrator.');
    expect(login.out.stdout).toMatch(new RegExp(`^Signed in as ${email} on ${authUrl}`));

    // The second machine pairs without an e-mail (a script: it names the account it expects);
    // the first approves its code.
    const pairing = spawnCli(
      loginArgs('login --auth https://<host>:8445 --account <e-mail>', { 'e-mail': email }),
      second,
    );
    const secondCode = await pairing.code();
    const approved = await cli(fromReadme('pair approve <code>', { code: secondCode }), first);
    expect(approved.code).toBe(0);
    expect(await pairing.exited).toBe(0);
    expect(pairing.out.stderr).toContain('Approved on your device');
    expect(pairing.out.stdout).toMatch(new RegExp(`^Signed in as ${email} on ${authUrl}`));
  }, 90_000);

  it('with an e-mail and no SMTP, a machine pairs and the link the host prints approves it', async () => {
    const login = spawnCli(loginArgs(`login ${email} --auth https://<host>:8445`), third);
    const code = await login.code();
    expect(login.out.stderr).toContain('pairing instead');
    // The link as the host's terminal shows it, opened in a browser and its button pressed
    // (the page's GET, then its form's POST).
    const linkLine = await host.line(`[dev] Sign-in link for ${email}: `);
    const link = linkLine.slice(linkLine.indexOf(': ') + 2);
    expect(link.startsWith(`${authUrl}/auth/verify?token=`)).toBe(true);
    const page = await fetch(link, { headers: { Accept: 'text/html' } });
    const html = await page.text();
    expect(html).toContain(code);
    const fields = new URLSearchParams(
      [...html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map(
        (m) => [m[1] ?? '', m[2] ?? ''] as [string, string],
      ),
    );
    const confirmed = await fetch(`${authUrl}/auth/verify`, {
      method: 'POST',
      headers: { Accept: 'text/html', 'Content-Type': 'application/x-www-form-urlencoded' },
      body: fields,
    });
    expect(confirmed.status).toBe(200);
    expect(await login.exited).toBe(0);
    expect(login.out.stderr).toContain(`Approved through the sign-in link sent to ${email}.`);
    expect(login.out.stdout).toMatch(new RegExp(`^Signed in as ${email} on ${authUrl}`));
  }, 90_000);

  it('adds the project on both and exchanges messages both ways through the relay', async () => {
    const add = fromReadme('project add notes Notes');
    const [onFirst, onSecond] = await Promise.all([cli(add, first), cli(add, second)]);
    expect([onFirst.code, onSecond.code]).toEqual([0, 0]);
    const room = (out: string) => (JSON.parse(out) as { roomId: string }).roomId;
    expect(room(onSecond.stdout)).toBe(room(onFirst.stdout));

    // listen on one machine, send from the other, as the README shows (each with its own text).
    const listenArgs = fromReadme('listen notes');
    expect(readme).toContain(`bin/sync-host send notes broadcast '{"text":"hi"}'`);
    for (const [from, to, text] of [
      [first, second, 'from the first machine'],
      [second, first, 'from the second machine'],
    ] as const) {
      const listen = spawnCli(listenArgs, to);
      await eventually(() => listen.out.stderr.includes('joined room'), 'listen joined', 30_000);
      const sent = await cli(['send', 'notes', 'broadcast', JSON.stringify({ text })], from);
      expect(sent.code).toBe(0);
      await eventually(() => listen.out.stdout.includes('\n'), 'the message at listen', 15_000);
      expect(JSON.parse(listen.out.stdout.split('\n')[0] ?? '')).toMatchObject({
        payload: { text },
      });
      listen.child.kill('SIGINT');
      expect(await listen.exited).toBe(0);
    }
    expect(await host.stop('SIGTERM')).toBe(0);
  }, 90_000);
});
