import { readdirSync } from 'node:fs';
import { createServer, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCliRunner } from '../../helpers/cli-process.ts';
import { startTestHost, type TestHost } from '../../helpers/host.ts';
import { freePort } from '../../helpers/ports.ts';
import { tempDirMaker } from '../../helpers/temp-dirs.ts';

const { spawnCli, cli, killAll } = createCliRunner();

const tempDir = tempDirMaker('sync-first-');

let host: TestHost;

beforeAll(async () => {
  host = await startTestHost();
});

afterAll(async () => {
  killAll();
  await host?.close();
});

const pairingHint =
  'not signed in: run sync-host login --auth <URL> to pair this device (the host prints its auth URL at start; sync-host discover finds hosts on the LAN)';

/** A plain HTTP server on a loopback port: something that is not a sync-host. */
async function listenLoopback(handler: RequestListener) {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** `http://127.0.0.1:<port>` of a `ws://` or `http://` URL the host printed. */
const httpOf = (url: string) => url.replace(/^ws:/, 'http:');

// Each command is a fresh `bin/sync-host` process (seconds of start-up on a busy machine).
describe('what a new user meets on the command line', { timeout: 90_000 }, () => {
  it('tells every command run before login to pair this device, with where the URL comes from', async () => {
    const fresh = tempDir();
    const runs = await Promise.all([
      cli(['devices'], fresh),
      cli(['projects'], fresh),
      cli(['subscription'], fresh),
      cli(['logout'], fresh),
      cli(['pair', 'approve', 'BCDF-GHJK'], fresh),
      cli(['project', 'add', 'notes', 'Notes'], fresh),
      cli(['project', 'remove', 'notes'], fresh),
      cli(['send', 'notes', 'broadcast', '{}'], fresh),
      cli(['listen', 'notes'], fresh),
      cli(['sync', 'notes', tempDir()], fresh),
      cli(['service', 'install', 'notes', tempDir()], fresh),
    ]);
    for (const run of runs) {
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(/^sync-host [a-z]+: /);
      expect(run.stderr.trim().split('\n')).toHaveLength(1);
      expect(run.stderr.trim().slice(-pairingHint.length)).toBe(pairingHint);
      expect(run.stderr).not.toContain('<email>');
    }
  });

  it('names the closest option or subcommand for a typo, with exit code 2', async () => {
    const fresh = tempDir();
    const [auth, remove, add, approve, install, far, missing] = await Promise.all([
      cli(['login', '--auht', host.base], fresh),
      cli(['devices', 'remvoe', '3'], fresh),
      cli(['project', 'ad', 'notes', 'Notes'], fresh),
      cli(['pair', 'aprove', 'BCDF-GHJK'], fresh),
      cli(['service', 'instal', 'notes', '.'], fresh),
      cli(['login', '--zzzzzz', host.base], fresh),
      cli(['login', '--auth'], fresh),
    ]);
    expect(auth.stderr.trim()).toBe(
      'sync-host login: unknown option --auht: did you mean --auth? (see sync-host login --help)',
    );
    expect(remove.stderr).toContain('unknown devices command "remvoe": did you mean remove?');
    expect(add.stderr).toContain('unknown project command "ad": did you mean add?');
    expect(approve.stderr).toContain('unknown pair command "aprove": did you mean approve?');
    expect(install.stderr).toContain('unknown service command "instal": did you mean install?');
    expect(far.stderr).toContain('unknown option --zzzzzz');
    expect(far.stderr).not.toContain('did you mean');
    expect(missing.stderr).toContain('option --auth needs a value');
    for (const run of [auth, remove, add, approve, install, far, missing]) {
      expect(run.code).toBe(2);
      expect(run.stderr.trim().split('\n')).toHaveLength(1);
    }
  });

  it('says which port a login hit when it is the relay or its status port, and which to use', async () => {
    const relay = httpOf(host.relayUrl);
    const status = host.host.urls.status ?? '';
    expect(status).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const runs = await Promise.all([
      cli(['login', '--auth', relay], tempDir()),
      cli(['login', 'ann@example.org', '--auth', relay], tempDir()),
      cli(['login', '--auth', status], tempDir()),
      cli(['login', 'ann@example.org', '--auth', status], tempDir()),
      cli(['login', '--auth', status, '--token', 'f'.repeat(64)], tempDir()),
    ]);
    const [byPairing, byEmail, statusPairing, statusEmail, statusToken] = runs;
    const relayLine = `sync-host login: ${relay} is the relay (WebSocket) port, not the auth service; the auth service is on port 8445 by default: sync-host login --auth http://127.0.0.1:8445\n`;
    expect(byPairing!.stderr).toBe(relayLine);
    expect(byEmail!.stderr).toBe(relayLine);
    const statusLine = `sync-host login: ${status} is the relay's status port, not the auth service; the auth service is on port 8445 by default: sync-host login --auth http://127.0.0.1:8445\n`;
    expect(statusPairing!.stderr).toBe(statusLine);
    expect(statusEmail!.stderr).toBe(statusLine);
    expect(statusToken!.stderr).toBe(statusLine);
    for (const run of runs) expect(run.code).toBe(1);
  });

  it('tells a host that is not running from an address that leads nowhere', async () => {
    const idle = `http://127.0.0.1:${await freePort()}`;
    const [refused, unknown, relayAddress, tlsRelayAddress] = await Promise.all([
      cli(['login', '--auth', idle], tempDir()),
      cli(['login', '--auth', 'http://no-such-host.invalid:8445'], tempDir()),
      cli(['login', '--auth', 'ws://192.168.1.20:8443'], tempDir()),
      cli(['login', '--auth', 'wss://192.168.1.20:8443'], tempDir()),
    ]);
    // The relay's TLS address: the auth service speaks https then.
    expect(tlsRelayAddress.code).toBe(2);
    expect(tlsRelayAddress.stderr).toContain('sync-host login --auth https://192.168.1.20:8445 ');
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim()).toBe(
      `sync-host login: cannot reach the auth service at ${idle}: nothing listens there (connection refused); is the host running? it prints its URLs at start`,
    );
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(
      /^sync-host login: cannot reach the auth service at http:\/\/no-such-host\.invalid:8445: the host name does not resolve \((ENOTFOUND|EAI_AGAIN)\); check the address; on the same LAN, sync-host discover lists hosts\n$/,
    );
    expect(unknown.stderr).not.toContain('is the host running');
    expect(relayAddress.code).toBe(2);
    expect(relayAddress.stderr).toContain(
      "ws://192.168.1.20:8443 is the relay's address, the auth service is on port 8445 by default: sync-host login --auth http://192.168.1.20:8445",
    );
  });

  it('says where the auth URL comes from and what it looks like, and that the port goes in it', async () => {
    const fresh = tempDir();
    const [none, bare, noPort, port, server] = await Promise.all([
      cli(['login'], fresh),
      cli(['login', '--auth', '192.168.1.5:8445'], fresh),
      cli(['login', '--auth', 'nas.local'], fresh),
      cli(['login', '--port', '8445'], fresh),
      cli(['devices', '--server', 'nas.local'], fresh),
    ]);
    expect(none.stderr).toBe(
      'sync-host login: --auth URL is required: the auth URL the host prints at start (sync-host discover finds hosts on the LAN) (see sync-host login --help)\n',
    );
    expect(bare.stderr).toBe(
      'sync-host login: --auth must be an http:// or https:// URL: did you mean https://192.168.1.5:8445 (or http://192.168.1.5:8445 for a host with TLS=off)? (see sync-host login --help)\n',
    );
    // No port given: the auth service's, not https's 443.
    expect(noPort.stderr).toContain(
      'did you mean https://nas.local:8445 (or http://nas.local:8445',
    );
    const inUrl =
      "the host's address and port go in --auth URL, as the host prints it at start (https://<host>:8445)";
    expect(port.stderr).toBe(
      `sync-host login: unknown option --port: ${inUrl} (see sync-host login --help)\n`,
    );
    expect(server.stderr).toContain(`unknown option --server: ${inUrl}`);
    for (const run of [none, bare, noPort, port, server]) expect(run.code).toBe(2);
    expect(readdirSync(fresh)).toEqual([]);
  });

  it('tells a web server that is not a sync-host from a proxy whose host is not running, and https from http', async () => {
    // A router's or NAS's own web page (404 for what it does not serve), and nginx in front of
    // a stopped host (502 with its HTML page).
    const page = await listenLoopback((_req, res) => res.writeHead(404).end());
    const proxy = await listenLoopback((_req, res) =>
      res.writeHead(502, { 'content-type': 'text/html' }).end('<h1>502 Bad Gateway</h1>'),
    );
    try {
      const httpsUrl = page.url.replace('http:', 'https:');
      const [notSyncHost, hostDown, plainHttp] = await Promise.all([
        cli(['login', '--auth', page.url], tempDir()),
        cli(['login', '--auth', proxy.url], tempDir()),
        // https:// to a plain-HTTP port (a host with TLS=off, the relay's status port).
        cli(['login', '--auth', httpsUrl], tempDir()),
      ]);
      expect(plainHttp.stderr).toBe(
        `sync-host login: cannot reach the auth service at ${httpsUrl}: that port answers without TLS (ERR_SSL_WRONG_VERSION_NUMBER); give it with http:// if the host runs with TLS=off (it prints its URLs at start; the relay's status port is plain HTTP too)\n`,
      );
      expect(notSyncHost.stderr).toBe(
        `sync-host login: ${page.url} answered POST /auth/pair with HTTP 404 and no error body: is that a sync-host auth service? check the address and port (the host prints its auth URL at start) (http_error, HTTP 404)\n`,
      );
      expect(hostDown.stderr).toBe(
        `sync-host login: ${proxy.url} answered POST /auth/pair with HTTP 502 and no error body: a proxy in front of the host answers so while the host is not running (internal, HTTP 502)\n`,
      );
      for (const run of [notSyncHost, hostDown, plainHttp]) expect(run.code).toBe(1);
    } finally {
      await Promise.all([page.close(), proxy.close()]);
    }
  });

  it('pairs into a file without escape sequences, named after host and platform, and devices marks this device', async () => {
    const email = 'lee@example.org';
    const other = await host.signIn(email, 'desk');
    const config = tempDir();
    const login = spawnCli(['login', '--auth', host.base], config);
    const code = await login.code();
    const approved = await host.admin('POST', '/pairings/approve', { code, email });
    expect(approved.status).toBe(200);
    expect(await login.exited).toBe(0);
    expect(login.out.stderr).toMatch(/[▀▄█]{7}/);
    expect(login.out.stderr + login.out.stdout).not.toContain('\u001b');
    const name = `${hostname()} (${process.platform})`;
    expect(login.out.stdout).toContain(`"${name}"`);

    const devices = await cli(['devices'], config);
    expect(devices.code).toBe(0);
    const list = JSON.parse(devices.stdout) as Array<{
      id: number;
      deviceName: string;
      thisDevice: boolean;
    }>;
    expect(list.map((d) => [d.deviceName, d.thisDevice])).toEqual([
      ['desk', false],
      [name, true],
    ]);
    expect(list[0]!.id).toBe(other.deviceId);
    expect(login.out.stderr).not.toContain('another device named');
  });

  it('tells a removed device to pair again at its URL, and signs out a device that removes itself', async () => {
    const email = 'gone@example.org';
    const one = tempDir();
    const two = tempDir();
    for (const [dir, name] of [
      [one, 'one'],
      [two, 'two'],
    ] as const) {
      const login = spawnCli(['login', '--auth', host.base, '--device-name', name], dir);
      const code = await login.code();
      expect((await host.admin('POST', '/pairings/approve', { code, email })).status).toBe(200);
      expect(await login.exited).toBe(0);
    }
    const listed = JSON.parse((await cli(['devices'], one)).stdout) as Array<{
      id: number;
      thisDevice: boolean;
    }>;
    const idOne = listed.find((d) => d.thisDevice)?.id;
    const idTwo = listed.find((d) => !d.thisDevice)?.id;
    expect((await cli(['devices', 'remove', String(idTwo)], one)).code).toBe(0);
    const removed = await cli(['devices'], two);
    expect(removed.code).toBe(1);
    expect(removed.stderr).toMatch(
      /^sync-host devices: .* \(unauthorized, HTTP 401\); this device's token is not accepted there \(the device was removed, or signed in again elsewhere\): pair it again with sync-host login --auth (\S+)\n$/,
    );
    expect(removed.stderr).toContain(`--auth ${host.base}\n`);

    const self = await cli(['devices', 'remove', String(idOne)], one);
    expect(self.code).toBe(0);
    expect(self.stderr).toBe(
      `Device ${idOne} removed: it was this device, which is now signed out (to pair it again: sync-host login --auth ${host.base}).\n`,
    );
    const after = await cli(['devices'], one);
    expect(after.code).toBe(1);
    expect(after.stderr.trim().endsWith(pairingHint)).toBe(true);
  });

  it('says when the account already has a device of the same name, naming its id', async () => {
    // Two virtual machines, both called as this one: the same default name.
    const email = 'twin@example.org';
    const name = `${hostname()} (${process.platform})`;
    const other = await host.signIn(email, name);
    const login = spawnCli(['login', '--auth', host.base], tempDir());
    const code = await login.code();
    expect((await host.admin('POST', '/pairings/approve', { code, email })).status).toBe(200);
    expect(await login.exited).toBe(0);
    expect(login.out.stderr).toContain(
      `note: this account has another device named "${name}" (device ${other.deviceId}); sync-host devices tells them apart by id (name a machine with login --device-name)\n`,
    );
  });
});
