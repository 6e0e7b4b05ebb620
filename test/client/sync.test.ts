import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAuthClient } from '../../client/auth-client.ts';
import type { BackoffOptions } from '../../client/backoff.ts';
import { AuthServiceError, RelayError } from '../../client/errors.ts';
import type { RelayConnection } from '../../client/relay-connection.ts';
import { SyncClient } from '../../client/sync-client.ts';
import { hostDir, type RunningHost, startHostProgram } from '../helpers/host-process.ts';
import { freePort } from '../helpers/ports.ts';
import { eventually } from '../helpers/wait.ts';
import { inbox, signIn, trackedWebSocket } from './host.ts';

const fastBackoff = { initialDelayMs: 50, maxDelayMs: 400 };
const dirs: string[] = [];
const hosts: RunningHost[] = [];
const open: RelayConnection[] = [];

async function newHost(ports?: Parameters<typeof hostDir>[0]): Promise<RunningHost> {
  const dir = hostDir(ports);
  dirs.push(dir);
  const host = await startHostProgram(dir);
  hosts.push(host);
  return host;
}

/** An editor of `email` on this host, signed in (variant per device) and with sync enabled. */
async function editor(
  host: RunningHost,
  email: string,
  name: string,
  variant: 'device' | 'jwt' = 'device',
  backoff: BackoffOptions = fastBackoff,
) {
  const signedIn = await signIn(host, email, name, variant);
  const tracked = trackedWebSocket();
  const client = new SyncClient(
    {
      syncEnabled: true,
      syncAuthUrl: host.authUrl,
      syncRelayUrl: host.relayUrl,
      syncDeviceToken: signedIn.deviceToken,
    },
    { WebSocket: tracked.WebSocket, connection: { backoff } },
  );
  return { client, signedIn, sockets: tracked.sockets };
}

function track(connection: RelayConnection): RelayConnection {
  open.push(connection);
  return connection;
}

afterAll(async () => {
  await Promise.all(open.map((connection) => connection.close().catch(() => undefined)));
  await Promise.all(hosts.map((host) => host.process.stop('SIGKILL').catch(() => null)));
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('client library against a headless host', () => {
  let host: RunningHost;
  beforeAll(async () => {
    host = await newHost();
  });

  it('lets two editors of one user register one workspace and exchange edits both ways', async () => {
    const laptop = await editor(host, 'alice@example.org', 'laptop', 'device');
    const desktop = await editor(host, 'alice@example.org', 'desktop', 'jwt');
    expect(laptop.signedIn.user.id).toBe(desktop.signedIn.user.id);

    const a = await laptop.client.openProject('/home/alice/notes', 'notes');
    track(a.connection);
    const b = await desktop.client.openProject('/home/alice/notes', 'notes');
    track(b.connection);
    expect(b.project).toEqual(a.project);
    expect(await desktop.client.auth.projects()).toEqual([
      {
        ...a.project,
        role: 'owner',
        owner: { userId: laptop.signedIn.user.id, email: 'alice@example.org' },
      },
    ]);
    expect(a.connection.isHost).toBe(true);
    expect(b.connection.isHost).toBe(false);
    expect(b.connection.host).toBe(String(laptop.signedIn.device.id));

    const atA = inbox(a.connection);
    const atB = inbox(b.connection);
    a.connection.broadcast({ file: 'todo.md', edit: 'laptop 1' });
    b.connection.sendToHost({ file: 'todo.md', edit: 'desktop 1' });
    a.connection.sendToDevice(desktop.signedIn.device.id, { file: 'todo.md', edit: 'laptop 2' });
    await eventually(() => atA.length === 1 && atB.length === 2, 'edits both ways', 5_000);
    expect(atB).toEqual([
      {
        from: String(laptop.signedIn.device.id),
        to: 'broadcast',
        room: a.project.roomId,
        payload: { file: 'todo.md', edit: 'laptop 1' },
      },
      {
        from: String(laptop.signedIn.device.id),
        to: String(desktop.signedIn.device.id),
        room: a.project.roomId,
        payload: { file: 'todo.md', edit: 'laptop 2' },
      },
    ]);
    expect(atA).toEqual([
      {
        from: String(desktop.signedIn.device.id),
        to: 'host',
        room: a.project.roomId,
        payload: { file: 'todo.md', edit: 'desktop 1' },
      },
    ]);
    await Promise.all([a.connection.close(), b.connection.close()]);
  });

  it('reconnects a cut connection with the same device id and delivers every missed message once, in order', async () => {
    const laptop = await editor(host, 'carol@example.org', 'laptop');
    // The phone waits a whole second before it reconnects, so the sender surely sends while it
    // is away (with the fast backoff it could be back before the sender's first message).
    const phone = await editor(host, 'carol@example.org', 'phone', 'device', {
      initialDelayMs: 1_000,
      maxDelayMs: 1_000,
      jitter: 0,
    });
    const sender = track((await laptop.client.openProject('carol-ws', 'ws')).connection);
    const cut = track((await phone.client.openProject('carol-ws', 'ws')).connection);
    const received = inbox(cut);
    const rejoins: Array<{ buffered: number; gap: boolean; device: string }> = [];
    cut.on('joined', (frame) => rejoins.push(frame));
    const presence: string[] = [];
    sender.on('presence', (frame) => presence.push(frame.state));

    sender.broadcast({ n: 0 });
    await eventually(() => received.length === 1, 'first message', 5_000);
    // Abrupt: no close handshake, no leave.
    phone.sockets.at(-1)!.terminate();
    await eventually(() => presence.includes('left'), 'the relay noticed the drop', 5_000);

    // The sender keeps sending while the phone is away and after it is back.
    let n = 1;
    const timer = setInterval(() => sender.broadcast({ n: n++ }), 5);
    await eventually(() => rejoins.length === 1, 'rejoin', 10_000);
    const sentAtRejoin = n;
    await eventually(() => n >= sentAtRejoin + 20, 'messages after the rejoin', 5_000);
    clearInterval(timer);
    await sender.flush();
    const total = n;
    await eventually(() => received.length === total, `all ${total} messages`, 10_000);

    expect(received.map((m) => m.payload.n)).toEqual(Array.from({ length: total }, (_, i) => i));
    expect(rejoins[0]).toMatchObject({ device: String(phone.signedIn.device.id), gap: false });
    expect(rejoins[0]!.buffered).toBeGreaterThan(0);
    expect(phone.sockets).toHaveLength(2);
    await Promise.all([sender.close(), cut.close()]);
  });

  it('refuses a device of another user in that room and does not retry', async () => {
    const alice = await editor(host, 'dave@example.org', 'laptop');
    const mallory = await editor(host, 'mallory@example.org', 'laptop');
    const own = track((await alice.client.openProject('shared-key', 'shared')).connection);
    const seen: string[] = [];
    own.on('presence', (frame) => seen.push(frame.device));
    const roomId = (await alice.client.auth.projects())[0]!.roomId;

    // The same workspace key gives another user another room.
    const theirs = await mallory.client.auth.registerProject('shared-key', 'shared');
    expect(theirs.project.roomId).not.toBe(roomId);

    const intruder = mallory.client.joinRoom(roomId);
    const states: string[] = [];
    intruder.on('state', (state) => states.push(state));
    const refused = await intruder.connect().then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(RelayError);
    expect(refused).toMatchObject({ code: 'auth_failed', closeCode: 4001 });
    expect(states).toEqual(['connecting', 'closed']);
    expect(mallory.sockets).toHaveLength(1);
    // Alice's room never saw it.
    await own.flush();
    own.broadcast({ ping: true });
    await own.flush();
    expect(seen).toEqual([]);
    expect(() => intruder.broadcast({ x: 1 })).toThrow(RelayError);

    // And the auth service hides another user's project.
    const auth = createAuthClient({
      authUrl: host.authUrl,
      deviceToken: mallory.signedIn.deviceToken,
    });
    const ownId = (await alice.client.auth.projects())[0]!.id;
    const err = await auth.deleteProject(ownId).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AuthServiceError);
    expect(err).toMatchObject({ code: 'not_found', status: 404 });
    await own.close();
  });
});

/** What arrived of `0 … sent-1`, in the order received: the gaps, the copies, the reorderings. */
function arrivals(received: number[], sent: number) {
  const seen = new Set<number>();
  const doubled: number[] = [];
  const outOfOrder: number[] = [];
  received.forEach((n, i) => {
    if (seen.has(n)) doubled.push(n);
    seen.add(n);
    if (i > 0 && n < received[i - 1]!) outOfOrder.push(n);
  });
  const missing = Array.from({ length: sent }, (_, i) => i).filter((n) => !seen.has(n));
  return { missing, doubled, outOfOrder };
}

describe('client library across a host restart', () => {
  it.each([
    ['SIGTERM', 0],
    ['SIGKILL', null],
  ] as const)(
    'loses nothing when the host is stopped with %s and restarted while both editors keep sending',
    async (signal, exitCode) => {
      const ports = { auth: await freePort(), ws: await freePort(), status: await freePort() };
      const first = await newHost(ports);
      const laptop = await editor(first, 'erin@example.org', 'laptop');
      const desktop = await editor(first, 'erin@example.org', 'desktop');
      const a = track((await laptop.client.openProject('erin-ws', 'ws')).connection);
      const b = track((await desktop.client.openProject('erin-ws', 'ws')).connection);
      const atA = inbox(a);
      const atB = inbox(b);
      const joinsA: boolean[] = [];
      const joinsB: boolean[] = [];
      a.on('joined', (frame) => joinsA.push(frame.gap));
      b.on('joined', (frame) => joinsB.push(frame.gap));
      // Errors the relay sent (a rate_limited drop would explain a missing message).
      const errors: string[] = [];
      a.on('error', (err) => errors.push(`a: ${err.code}`));
      b.on('error', (err) => errors.push(`b: ${err.code}`));

      let na = 0;
      let nb = 0;
      const timer = setInterval(() => {
        a.broadcast({ from: 'a', n: na++ });
        b.broadcast({ from: 'b', n: nb++ });
      }, 10);
      try {
        await eventually(() => atA.length >= 10 && atB.length >= 10, 'traffic before', 5_000);
        expect(await first.process.stop(signal)).toBe(exitCode);
        await eventually(
          () => a.state === 'reconnecting' && b.state === 'reconnecting',
          'both reconnecting',
          5_000,
        );
        const second = await startHostProgram(dirs.at(-1)!);
        hosts.push(second);
        expect(second.authUrl).toBe(first.authUrl);
        await eventually(() => joinsA.length === 1 && joinsB.length === 1, 'both rejoined', 10_000);
        const after = na;
        await eventually(() => na >= after + 10, 'traffic after', 5_000);
      } finally {
        clearInterval(timer);
      }
      await Promise.all([a.flush(), b.flush()]);
      // Not there in time: the check below says what is missing.
      await eventually(() => atA.length >= nb && atB.length >= na, 'all', 10_000).catch(() => 0);
      // Said as what is missing, doubled or out of order, so that a failure tells which.
      expect({
        atB: arrivals(
          atB.map((m) => Number(m.payload.n)),
          na,
        ),
        atA: arrivals(
          atA.map((m) => Number(m.payload.n)),
          nb,
        ),
        joins: [...joinsA, ...joinsB],
        errors,
      }).toEqual({
        atB: { missing: [], doubled: [], outOfOrder: [] },
        atA: { missing: [], doubled: [], outOfOrder: [] },
        joins: [false, false],
        errors: [],
      });
      await Promise.all([a.close(), b.close()]);
    },
    40_000,
  );
});
