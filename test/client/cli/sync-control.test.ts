import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { probeControl } from '../../../client/cli/control-client.ts';
import { controlSocketPath } from '../../../client/cli/control-path.ts';
import type { CloseInfo } from '../../../client/relay-connection.ts';
import { createRelayConnection } from '../../../client/relay-connection.ts';
import { type CliRun, createCliRunner } from '../../helpers/cli-process.ts';
import { registerProject, startTestHost, type TestHost } from '../../helpers/host.ts';
import { eventually } from '../../helpers/wait.ts';

// The reconnect pause of `sync` after its connection was taken over: short for the test.
const { spawnCli, cli, killAll } = createCliRunner({ env: { SYNC_HOST_TEST_RECONNECT_MS: '300' } });
const temps: string[] = [];

function tempDir(prefix = 'sync-control-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temps.push(dir);
  return dir;
}

/** The lines of a control socket's answers to `requests` (one line each), in order. */
async function askSocket(path: string, requests: string[]): Promise<unknown[]> {
  const socket = createConnection(path);
  const lines = createInterface({ input: socket })[Symbol.asyncIterator]();
  const answers: unknown[] = [];
  try {
    for (const request of requests) {
      socket.write(`${request}\n`);
      const next = await lines.next();
      answers.push(JSON.parse(String(next.value)));
    }
    return answers;
  } finally {
    socket.destroy();
  }
}

describe('a running sync owns the device’s connection: send, listen and a second sync go through it', () => {
  let th: TestHost;
  let roomId = '';
  const config = { one: '', two: '' };
  const device = { one: 0, two: 0 };
  const token = { one: '' };

  beforeAll(async () => {
    th = await startTestHost({ ui: false });
    const one = await th.signIn('control@example.org', 'one');
    const two = await th.signIn('control@example.org', 'two');
    device.one = one.deviceId;
    device.two = two.deviceId;
    token.one = one.deviceToken;
    roomId = (await registerProject(th.base, one.deviceToken, 'shared')).roomId;
    config.one = tempDir();
    config.two = tempDir();
    for (const [dir, t] of [
      [config.one, one.deviceToken],
      [config.two, two.deviceToken],
    ] as const) {
      expect((await cli(['login', '--auth', th.base, '--token', t], dir)).code).toBe(0);
    }
  });

  // A test that failed leaves no sync running to stand in the next one's way.
  afterEach(() => killAll());

  afterAll(async () => {
    killAll();
    await th?.close();
    for (const dir of temps) rmSync(dir, { recursive: true, force: true });
  });

  const startSync = (configDir: string, folder: string, extra: string[] = []) =>
    spawnCli(['sync', 'shared', folder, '--relay', th.relayUrl, ...extra], configDir);

  async function watching(run: CliRun): Promise<void> {
    await eventually(() => run.out.stdout.includes('watching'), 'the sync watching', 15_000);
  }

  /** Until the sync of `configDir` says, on its control socket, that it joined the room. */
  async function joined(configDir: string): Promise<void> {
    const socket = controlSocketPath(configDir, th.base, 'shared');
    await eventually(
      async () => {
        const probe = await probeControl(socket);
        return probe.kind === 'running' && probe.status?.state === 'joined';
      },
      'the sync joined',
      15_000,
    );
  }

  async function stop(...runs: CliRun[]): Promise<void> {
    for (const run of runs) run.child.kill('SIGTERM');
    for (const run of runs) expect(await run.exited).toBe(0);
  }

  it('lets listen and send through, refuses a second sync, answers status, and keeps syncing', async () => {
    const folder = { one: tempDir(), two: tempDir() };
    const one = startSync(config.one, folder.one);
    const two = startSync(config.two, folder.two);
    await Promise.all([watching(one), watching(two)]);

    const listen = spawnCli(['listen', 'shared'], config.one);
    await eventually(() => listen.out.stderr.includes('joined room'), 'listen attached', 15_000);
    expect(listen.out.stderr).toContain('listening through the running sync');
    const sent = await cli(['send', 'shared', String(device.one), '{"hello":"one"}'], config.two);
    expect(sent).toMatchObject({ code: 0, stdout: '', stderr: '' });
    const line = await eventually(
      () => listen.out.stdout.split('\n').find((l) => l.includes('hello')),
      'the message at listen',
      10_000,
    );
    expect(JSON.parse(line)).toEqual({
      from: String(device.two),
      to: String(device.one),
      room: roomId,
      payload: { hello: 'one' },
    });
    // A relay refusal of a message sent through the sync is the send's error.
    const unknown = await cli(['send', 'shared', '999999', '{}'], config.one);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr.trim().split('\n')).toEqual([expect.stringContaining('unknown_target')]);

    // A second sync of the project for the same device: one line naming the running one.
    const elsewhere = join(tempDir(), 'not-created');
    const second = await cli(['sync', 'shared', elsewhere, '--relay', th.relayUrl], config.one);
    expect(second.code).toBe(1);
    expect(second.stderr.trim().split('\n')).toEqual([
      `sync-host sync: a sync of "shared" is already running for this device: pid ${one.child.pid}, folder ${folder.one} (already_running)`,
    ]);
    expect(existsSync(elsewhere)).toBe(false);

    // The socket answers status, and a bad line with an error, never ending the sync.
    const socket = controlSocketPath(config.one, th.base, 'shared');
    const answers = await askSocket(socket, [
      'not json',
      '{"op":"launch"}',
      '{"op":"send","to":"broadcast","payload":[1]}',
      '{"op":"status"}',
    ]);
    expect(answers.slice(0, 3)).toEqual([
      { ok: false, error: { code: 'invalid_json', message: expect.any(String) } },
      { ok: false, error: { code: 'invalid_request', message: expect.any(String) } },
      {
        ok: false,
        error: { code: 'invalid_request', message: expect.stringContaining('payload') },
      },
    ]);
    expect(answers[3]).toMatchObject({
      ok: true,
      status: {
        state: 'joined',
        projectKey: 'shared',
        folder: folder.one,
        device: String(device.one),
        devices: expect.arrayContaining([String(device.one), String(device.two)]),
        pid: one.child.pid,
      },
    });

    // A client may end its side after its request (as `printf … | nc -U` does) and still
    // get the answer, which comes once the relay confirmed the message.
    const halfOpen = createConnection(socket);
    halfOpen.end('{"op":"send","to":"broadcast","payload":{"half":"open"}}\n');
    let answered = '';
    halfOpen.on('data', (chunk: Buffer) => {
      answered += chunk.toString();
    });
    await new Promise((resolve) => halfOpen.on('end', resolve));
    expect(JSON.parse(answered)).toEqual({ ok: true });

    // Through all this the sync kept its connection, and it still syncs.
    writeFileSync(join(folder.one, 'after.txt'), 'still syncing\n');
    await eventually(
      () =>
        existsSync(join(folder.two, 'after.txt')) &&
        readFileSync(join(folder.two, 'after.txt'), 'utf8'),
      'after.txt at two',
      15_000,
    );
    expect(one.child.exitCode).toBeNull();
    expect(one.out.stderr).not.toMatch(/connection ended|replaced/);
    await stop(listen);
    // A listen through a sync that stops ends with one line.
    const orphan = spawnCli(['listen', 'shared'], config.one);
    await eventually(() => orphan.out.stderr.includes('joined room'), 'listen attached', 15_000);
    await stop(one, two);
    expect(await orphan.exited).toBe(1);
    expect(orphan.out.stderr.trim().split('\n').at(-1)).toBe(
      'sync-host listen: the sync this listen went through stopped (sync_stopped)',
    );
  }, 90_000);

  it('replaces the socket file of a sync killed with SIGKILL (socket under tmp for a long config path)', async () => {
    // A config folder too deep for a socket path: the socket goes to a folder under tmp.
    const deep = join(tempDir(), 'a'.repeat(60), 'b'.repeat(60));
    mkdirSync(deep, { recursive: true });
    expect((await cli(['login', '--auth', th.base, '--token', token.one], deep)).code).toBe(0);
    const socket = controlSocketPath(deep, th.base, 'shared');
    expect(socket.startsWith(join(tmpdir(), 'sync-host-'))).toBe(true);
    temps.push(dirname(socket));
    const folder = tempDir();
    const first = startSync(deep, folder);
    await watching(first);
    expect(existsSync(socket)).toBe(true);
    first.child.kill('SIGKILL');
    await first.exited;
    expect(existsSync(socket)).toBe(true);

    const again = startSync(deep, folder);
    await watching(again);
    const sent = await cli(['send', 'shared', 'broadcast', '{"after":"restart"}'], deep);
    expect(sent).toMatchObject({ code: 0, stderr: '' });
    expect(again.out.stderr).not.toContain('already_running');
    await stop(again);
    expect(existsSync(socket)).toBe(false);
  }, 60_000);

  it('joins again by itself after another connection of the device took its place', async () => {
    const folder = { one: tempDir(), two: tempDir() };
    const one = startSync(config.one, folder.one);
    const two = startSync(config.two, folder.two);
    await Promise.all([watching(one), watching(two)]);
    // "watching" comes before the join: an intruder joining first would be replaced instead.
    await joined(config.one);

    const intruder = createRelayConnection({
      url: th.relayUrl,
      room: roomId,
      device: String(device.one),
      token: token.one,
      WebSocket,
    });
    const intruderClosed = new Promise<CloseInfo>((resolve) => intruder.on('close', resolve));
    await intruder.connect();
    await eventually(
      () => one.out.stderr.includes('connection ended'),
      'the sync told it was replaced',
      10_000,
    );
    expect(one.out.stderr).toMatch(
      /connection ended: this device joined the room on another connection.*\(replaced\); joining again in 0\.\d s/,
    );
    // After its pause the sync joins again, which in turn replaces the intruder.
    const closed = await intruderClosed;
    expect(closed.error?.code).toBe('replaced');
    expect(one.child.exitCode).toBeNull();

    writeFileSync(join(folder.one, 'back.txt'), 'back again\n');
    await eventually(
      () =>
        existsSync(join(folder.two, 'back.txt')) &&
        readFileSync(join(folder.two, 'back.txt'), 'utf8'),
      'back.txt at two',
      15_000,
    );
    await stop(one, two);
  }, 60_000);

  it('ends with one line, exit 3, when its device is removed (no rejoin after revoked)', async () => {
    const three = await th.signIn('control@example.org', 'three');
    const configThree = tempDir();
    expect(
      (await cli(['login', '--auth', th.base, '--token', three.deviceToken], configThree)).code,
    ).toBe(0);
    const run = startSync(configThree, tempDir());
    await watching(run);
    const removed = await cli(['devices', 'remove', String(three.deviceId)], config.one);
    expect(removed.code).toBe(0);
    expect(await run.exited).toBe(3);
    expect(run.out.stderr).not.toContain('joining again');
    expect(run.out.stderr.trim().split('\n').at(-1)).toMatch(/^sync-host sync: .*\(revoked\)$/);
  }, 60_000);

  it('reads the passphrase of --encrypt from a file of mode 0600 and refuses one others may read', async () => {
    const secrets = tempDir();
    const open = join(secrets, 'open.txt');
    writeFileSync(open, 'the passphrase\n', { mode: 0o644 });
    const refused = await cli(
      ['sync', 'shared', tempDir(), '--encrypt', '--passphrase-file', open],
      config.one,
    );
    expect(refused.code).toBe(2);
    expect(refused.stderr.trim().split('\n')).toEqual([
      expect.stringContaining('may be read by other users (mode 0644); chmod 600 it'),
    ]);
    const noEncrypt = await cli(
      ['sync', 'shared', tempDir(), '--passphrase-file', open],
      config.one,
    );
    expect(noEncrypt.code).toBe(2);

    const closed = join(secrets, 'closed.txt');
    writeFileSync(closed, 'the passphrase\nignored second line\n', { mode: 0o600 });
    const typed = join(secrets, 'typed.txt');
    writeFileSync(typed, '  the passphrase  ', { mode: 0o400 });
    const folder = { one: tempDir(), two: tempDir() };
    writeFileSync(join(folder.one, 'secret.txt'), 'sealed\n');
    const one = startSync(config.one, folder.one, ['--encrypt', '--passphrase-file', closed]);
    one.child.stdin.end();
    const two = startSync(config.two, folder.two, ['--encrypt', '--passphrase-file', typed]);
    two.child.stdin.end();
    await eventually(
      () =>
        existsSync(join(folder.two, 'secret.txt')) &&
        readFileSync(join(folder.two, 'secret.txt'), 'utf8') === 'sealed\n',
      'secret.txt at two',
      20_000,
    );
    expect(one.out.stderr + two.out.stderr).not.toContain('passphrase');
    await stop(one, two);
  }, 60_000);
});
