import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import type { RelayConnectionOptions } from '../../client/connection-options.ts';
import { maxRememberedSessions } from '../../client/dedupe-envelope.ts';
import type { RelayError } from '../../client/errors.ts';
import {
  type ConnectionState,
  createRelayConnection,
  type RelayConnection,
  type RelayEvents,
} from '../../client/relay-connection.ts';
import { AuthFailed, Replaced, Revoked } from '../../protocol/relay-codes.ts';
import { FakeRelay, type FakeRelayConnection, joinedFor, routed } from '../helpers/fake-relay.ts';
import { inbox } from './host.ts';
import { ManualClock } from './manual-clock.ts';

/**
 * The relay connection against a scripted fake relay: real sockets on loopback, time moved by
 * hand (a `ManualClock`), so timeouts are exact and nothing waits on wall-clock seconds.
 */

const device = '2';
let relay: FakeRelay;
const open: RelayConnection[] = [];

beforeEach(async () => {
  relay = await FakeRelay.start();
});

afterEach(async () => {
  // Every frame the client wrote is one the relay accepts.
  const refused = relay.connections.flatMap((server) =>
    server.received.filter((frame) => frame.type === 'invalid'),
  );
  expect(refused).toEqual([]);
  await relay.close();
  await Promise.all(open.splice(0).map((connection) => connection.close()));
});

/**
 * A connection to the fake relay on a manual clock, with reconnect delays without jitter
 * (250 ms, 500 ms...). `written` logs each frame at the moment the client writes it.
 */
function connectionTo(overrides: Partial<RelayConnectionOptions> = {}) {
  const clock = new ManualClock();
  const written: string[] = [];
  const sockets: WebSocket[] = [];
  class RecordingWebSocket extends WebSocket {
    constructor(url: string) {
      super(url);
      sockets.push(this);
      const send = this.send.bind(this);
      this.send = ((data: string) => {
        written.push(data);
        send(data);
      }) as WebSocket['send'];
    }
  }
  const connection = createRelayConnection({
    url: relay.url,
    room: '1.abc.def',
    device,
    token: '1:2:3.ab',
    WebSocket: RecordingWebSocket,
    clock,
    backoff: { random: () => 0 },
    ...overrides,
  });
  open.push(connection);
  const states: ConnectionState[] = [];
  const errors: RelayError[] = [];
  connection.on('state', (state) => states.push(state));
  connection.on('error', (error) => errors.push(error));
  const pingsWritten = () => written.filter((text) => text === '{"type":"ping"}').length;
  return { connection, clock, sockets, states, errors, written, pingsWritten };
}

/** The next `event` of the connection. */
function nextEvent<K extends keyof RelayEvents>(
  connection: RelayConnection,
  event: K,
): Promise<Parameters<RelayEvents[K]>[0]> {
  return new Promise((resolve) => {
    const stop = connection.on(event, ((value: Parameters<RelayEvents[K]>[0]) => {
      stop();
      resolve(value);
    }) as RelayEvents[K]);
  });
}

/**
 * Once this resolves, the client has handled every frame the fake relay sent before (frames
 * arrive in order): a presence frame goes out and the test waits for its event.
 */
async function handled(server: FakeRelayConnection, connection: RelayConnection): Promise<void> {
  const seen = nextEvent(connection, 'presence');
  server.send({ type: 'presence', room: '1.abc.def', device: '7', state: 'left' });
  await seen;
}

describe('relay connection: refusals that end it for good', () => {
  it.each([
    [Revoked.code, Revoked.reason, 'revoked', 'this device was revoked: device revoked'],
    [
      Replaced.code,
      Replaced.reason,
      'replaced',
      'this device joined the room on another connection: replaced by a newer connection',
    ],
  ])(
    'on close %i closes with the error, rejects flush() and never reconnects',
    async (closeCode, reason, code, message) => {
      relay.answerPings = false;
      const { connection, clock, sockets, states, errors } = connectionTo();
      await connection.connect();
      const server = relay.connections[0]!;
      connection.broadcast({ n: 1 });
      await server.next('ping');
      const flushed = connection.flush();
      const closed = nextEvent(connection, 'close');
      await server.play([{ close: closeCode, reason }]);

      const info = await closed;
      expect(info).toEqual({ code: closeCode, error: expect.objectContaining({ code, message }) });
      expect(info.error?.closeCode).toBe(closeCode);
      expect(errors).toEqual([info.error]);
      await expect(flushed).rejects.toBe(info.error);
      expect(states).toEqual(['connecting', 'joined', 'closed']);
      clock.advance(600_000); // far past every reconnect delay
      expect(sockets).toHaveLength(1);
      expect(clock.pending).toBe(0);
      expect(() => connection.broadcast({ n: 2 })).toThrow(
        expect.objectContaining({ code: 'closed' }),
      );
    },
  );

  it('rejects connect() with the reason of the error frame before close 4001 and does not retry', async () => {
    relay.onJoin = (_join, server) => {
      void server.play([
        { type: 'error', code: 'auth_failed', message: 'the token was signed with another secret' },
        { close: AuthFailed.code, reason: AuthFailed.reason },
      ]);
    };
    const { connection, clock, sockets } = connectionTo();
    await expect(connection.connect()).rejects.toMatchObject({
      code: 'auth_failed',
      closeCode: AuthFailed.code,
      message: 'the relay refused the join: the token was signed with another secret',
    });
    clock.advance(600_000);
    expect(sockets).toHaveLength(1);
    expect(connection.state).toBe('closed');
  });
});

describe('relay connection: attempts that fail but may succeed later', () => {
  it('abandons a join the relay does not answer within joinTimeoutMs and joins on the next try', async () => {
    relay.onJoin = () => undefined;
    const { connection, clock, sockets, states } = connectionTo({ joinTimeoutMs: 10_000 });
    const joined = connection.connect();
    const first = await relay.connection(0);
    await first.next('join');
    clock.advance(9_999);
    expect(connection.state).toBe('connecting');
    clock.advance(1);
    expect(connection.state).toBe('reconnecting');
    await first.closed;

    relay.onJoin = (join, server) => server.send(joinedFor(join));
    clock.advance(250);
    expect(sockets).toHaveLength(2);
    await joined;
    expect(states).toEqual(['connecting', 'reconnecting', 'connecting', 'joined']);
  });

  it('reports an error frame before joined (room_full), drops that socket and tries again', async () => {
    let refusals = 1;
    relay.onJoin = (join, server) => {
      if (refusals-- > 0) server.send({ type: 'error', code: 'room_full', message: 'full' });
      else server.send(joinedFor(join));
    };
    const { connection, clock, errors } = connectionTo();
    const joined = connection.connect();
    await (await relay.connection(0)).closed;
    expect(connection.state).toBe('reconnecting');
    expect(errors.map((error) => [error.code, error.message])).toEqual([['room_full', 'full']]);
    clock.advance(250);
    await joined;
    expect(connection.state).toBe('joined');
  });
});

describe('relay connection: a dead connection', () => {
  it('sends a ping after exactly keepAliveMs of quiet, one per quiet period, and stays joined while pongs come', async () => {
    const { connection, clock, pingsWritten, states } = connectionTo({ keepAliveMs: 25_000 });
    await connection.connect();
    const server = relay.connections[0]!;
    for (let round = 1; round <= 2; round++) {
      clock.advance(24_999);
      expect(pingsWritten()).toBe(round - 1);
      clock.advance(1);
      expect(pingsWritten()).toBe(round);
      await server.next('ping');
      await handled(server, connection); // the pong is in
    }
    expect(states).toEqual(['connecting', 'joined']);

    relay.answerPings = false;
    clock.advance(25_000);
    expect(pingsWritten()).toBe(3);
    clock.advance(9_999);
    expect(connection.state).toBe('joined');
    clock.advance(1);
    expect(connection.state).toBe('reconnecting');
    expect(await server.closed).toMatchObject({ code: 1006 }); // cut, no close handshake
  });

  it('gives up on a socket whose pong is pongTimeoutMs late and sends the unconfirmed message again, unchanged', async () => {
    relay.answerPings = false;
    const { connection, clock, sockets, states } = connectionTo({ pongTimeoutMs: 10_000 });
    await connection.connect();
    const first = relay.connections[0]!;
    connection.broadcast({ n: 1 });
    const sent = await first.next('message');
    await first.next('ping');
    clock.advance(9_999);
    expect(connection.state).toBe('joined');
    clock.advance(1);
    expect(connection.state).toBe('reconnecting');
    expect(connection.queued).toBe(1);
    await first.closed;

    relay.answerPings = true;
    clock.advance(249);
    expect(sockets).toHaveLength(1);
    clock.advance(1); // the first reconnect delay: 250 ms without jitter
    expect(sockets).toHaveLength(2);
    const second = await relay.connection(1);
    await second.next('join');
    expect(await second.next('message')).toEqual(sent); // same envelope: receivers drop a copy
    await connection.flush();
    expect(connection.queued).toBe(0);
    expect(states).toEqual(['connecting', 'joined', 'reconnecting', 'connecting', 'joined']);
  });
});

describe('relay connection: pacing', () => {
  it('writes a burst, then one frame per 1/ratePerSecond, the confirming ping included', async () => {
    const { connection, clock, written } = connectionTo({ ratePerSecond: 10, rateBurst: 3 });
    for (let n = 1; n <= 5; n++) connection.broadcast({ n }); // queued until joined
    await connection.connect();
    const kinds = () => written.slice(1).map((text) => (text.includes('"ping"') ? 'ping' : 'msg'));
    expect(kinds()).toEqual(['msg', 'msg', 'msg']);
    clock.advance(99);
    expect(kinds()).toHaveLength(3);
    clock.advance(1);
    expect(kinds()).toEqual(['msg', 'msg', 'msg', 'msg']);
    clock.advance(200);
    expect(kinds()).toEqual(['msg', 'msg', 'msg', 'msg', 'msg', 'ping']);
    await connection.flush();
    expect(connection.queued).toBe(0);
  });
});

describe('relay connection: the dedupe envelope', () => {
  const sealed = (s: string, n: number, label: string) => ({ label, _sync: { s, n } });

  it('drops copies it has seen and forgets the least recently advanced sender session first', async () => {
    const { connection } = connectionTo();
    const messages = inbox(connection);
    await connection.connect();
    const server = relay.connections[0]!;
    server.send(routed('5', sealed('a', 1, 'a1')));
    server.send(routed('5', sealed('a', 1, 'a1 again')));
    server.send(routed('5', sealed('b', 1, 'b1')));
    server.send(routed('5', sealed('a', 2, 'a2'))); // a advances: b is now the oldest
    for (let i = 1; i < maxRememberedSessions; i++)
      server.send(routed('5', sealed(`f${i}`, 1, 'fill')));
    server.send(routed('5', sealed('a', 2, 'a2 again'))); // still remembered
    server.send(routed('5', sealed('b', 1, 'b1 again'))); // forgotten: delivered again
    server.send(routed('6', sealed('a', 2, 'a2 from 6'))); // another device, another sender
    server.send(routed('5', { label: 'end' }));
    await handled(server, connection);

    const labels = messages.map((message) => message.payload.label);
    expect(labels.filter((label) => label !== 'fill')).toEqual([
      'a1',
      'b1',
      'a2',
      'b1 again',
      'a2 from 6',
      'end',
    ]);
    expect(labels.filter((label) => label === 'fill')).toHaveLength(maxRememberedSessions - 1);
    expect(messages.some((message) => '_sync' in message.payload)).toBe(false);
  });

  it('with dedupe: false sends payloads unchanged, _sync included, and still drops enveloped copies', async () => {
    const { connection } = connectionTo({ dedupe: false });
    const messages = inbox(connection);
    await connection.connect();
    const server = relay.connections[0]!;
    connection.broadcast({ n: 1 });
    connection.sendToHost({ _sync: 'the application’s own key' });
    expect(await server.next('message')).toEqual({
      type: 'message',
      to: 'broadcast',
      payload: { n: 1 },
    });
    expect(await server.next('message')).toEqual({
      type: 'message',
      to: 'host',
      payload: { _sync: 'the application’s own key' },
    });

    server.send(routed('5', sealed('a', 1, 'a1')));
    server.send(routed('5', sealed('a', 1, 'a1 again')));
    await handled(server, connection);
    expect(messages.map((message) => message.payload)).toEqual([{ label: 'a1' }]);
  });

  it('sends a message with once: false without the envelope, in order with the others', async () => {
    const { connection } = connectionTo();
    await connection.connect();
    const server = relay.connections[0]!;
    connection.broadcast({ n: 1 });
    connection.send('broadcast', { n: 2 }, { once: false });
    connection.send(7, { n: 3 });
    expect(await server.next('message')).toMatchObject({ payload: { n: 1, _sync: { n: 1 } } });
    expect(await server.next('message')).toEqual({
      type: 'message',
      to: 'broadcast',
      payload: { n: 2 },
    });
    expect(await server.next('message')).toMatchObject({ payload: { n: 3, _sync: { n: 3 } } });
  });
});
