import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { toBase64 } from '../../client/base64.ts';
import { deriveE2EKey } from '../../client/e2e-key.ts';
import type { SyncError } from '../../client/errors.ts';
import type { RelayConnection } from '../../client/relay-connection.ts';
import type { PresenceFrame } from '../../client/relay-frames.ts';
import type { YjsProvider } from '../../client/yjs-provider.ts';
import { startTestHost, type TestHost } from '../helpers/host.ts';
import { eventually } from '../helpers/wait.ts';
import { converged, openYjsRoom, type YjsRoom } from './yjs-room.ts';

/** What a receiving provider went through: its errors, the most it held, messages per sender. */
interface Watched {
  errors: SyncError[];
  mostHeld: number;
  received: Map<string, number>;
}

/**
 * Watches `provider` from now on. Its connection's listener runs after the provider's own, so
 * `mostHeld` is what the provider held after each routed message it handled.
 */
function watch(provider: YjsProvider): Watched {
  const watched: Watched = { errors: [], mostHeld: 0, received: new Map() };
  provider.on('error', (error) => watched.errors.push(error));
  provider.connection.on('message', (message) => {
    watched.mostHeld = Math.max(watched.mostHeld, provider.pendingReceiveBytes);
    watched.received.set(message.from, (watched.received.get(message.from) ?? 0) + 1);
  });
  return watched;
}

/**
 * Sends pieces `0..count-1` of a message declared as `n` pieces of `size` bytes, as raw
 * provider payloads `{y, doc, kc, m, i, n, d}`, from `connection` to device `to`.
 */
function sendPieces(
  connection: RelayConnection,
  to: string,
  message: { doc: string; m: string; n: number; size: number; count: number; kc?: string },
): void {
  const { doc, m, n, size, count, kc } = message;
  const d = toBase64(new Uint8Array(size).fill(7));
  for (let i = 0; i < count; i += 1) {
    connection.sendToDevice(to, { y: 1, doc, ...(kc === undefined ? {} : { kc }), m, i, n, d });
  }
}

/** A random string of `length` letters: a Yjs update that carries it is about as long. */
function randomText(length: number): string {
  const letters = 'abcdefghijklmnopqrstuvwxyz ';
  let text = '';
  for (let i = 0; i < length; i += 1) text += letters[Math.floor(Math.random() * letters.length)];
  return text;
}

describe('bounds on what the Yjs provider receives', () => {
  let th: TestHost;
  let room: YjsRoom;
  /** Device ids as the relay names them. */
  const id = (index: number) => String(room.devices[index]!.deviceId);

  beforeAll(async () => {
    th = await startTestHost({ ui: false });
    room = await openYjsRoom(th, 'bounds@example.org', 'bounds', 4);
  });

  afterAll(async () => {
    await room?.close();
    await th?.close();
  });

  it('keeps nothing of a large message sealed with another passphrase and reports it once', async () => {
    const victim = await room.provider(0, { name: 'wrong-key', passphrase: 'right one' });
    const watched = watch(victim);
    const { connection: attacker } = await room.connect(1);
    const wrong = await deriveE2EKey('wrong one', room.roomId);
    // 4,000 pieces of 24,000 bytes: 96 MB, under the default bound; it is the key that is wrong.
    const message = { doc: 'wrong-key', m: 'huge', n: 4_000, size: 24_000, count: 40 };
    sendPieces(attacker, id(0), { ...message, kc: wrong.check });
    await attacker.flush();
    await eventually(() => watched.received.get(id(1)) === 40, 'every piece at the victim');
    expect(watched.mostHeld).toBe(0);
    expect(victim.pendingReceiveBytes).toBe(0);
    expect(watched.errors.map((e) => e.code)).toEqual(['wrong_passphrase']);
    expect(watched.errors[0]?.message).toContain(`device ${id(1)} `);
    await attacker.close();
  });

  it('refuses a message declared larger than maxReceiveBytes at its first piece', async () => {
    const byDefault = await room.provider(0, { name: 'over-default' });
    const small = await room.provider(0, {
      name: 'over-set',
      connection: byDefault.connection,
      maxReceiveBytes: 100_000,
    });
    const watchedDefault = watch(byDefault);
    const watchedSmall = watch(small);
    const { connection: attacker } = await room.connect(1);
    // 1,000,000 pieces of 1,000 bytes: 1 GB, over the default 256 MiB.
    sendPieces(attacker, id(0), {
      doc: 'over-default',
      m: 'a',
      n: 1_000_000,
      size: 1_000,
      count: 20,
    });
    // 101 pieces of 1,000 bytes: 101,000 bytes, over the 100,000 set.
    sendPieces(attacker, id(0), { doc: 'over-set', m: 'b', n: 101, size: 1_000, count: 20 });
    await attacker.flush();
    await eventually(() => watchedDefault.received.get(id(1)) === 40, 'every piece at the victim');
    for (const [provider, watched] of [
      [byDefault, watchedDefault],
      [small, watchedSmall],
    ] as const) {
      expect(watched.mostHeld).toBe(0);
      expect(provider.pendingReceiveBytes).toBe(0);
      expect(watched.errors.map((e) => e.code)).toEqual(['invalid_payload']);
    }
    expect(watchedSmall.errors[0]?.message).toContain('101 pieces of 1000 bytes');
    await attacker.close();
  });

  it('drops what a device sent of an unfinished message when it leaves, or drops out', async () => {
    const victim = await room.provider(0, { name: 'left-half' });
    const piece = { doc: 'left-half', n: 10, size: 10_000, count: 5 };
    for (const leave of [true, false]) {
      const { connection: sender } = await room.connect(2);
      sendPieces(sender, id(0), { ...piece, m: `half-${leave}` });
      await eventually(() => victim.pendingReceiveBytes === 50_000, 'half the message held');
      await sender.close({ leave });
      await eventually(() => victim.pendingReceiveBytes === 0, 'nothing held after it left');
      expect(victim.peers).not.toContain(id(2));
    }
  });

  it('drops what a device sent when it is not in the room at the next join', async () => {
    let reachable = true;
    const sockets: WebSocket[] = [];
    /** `ws`, pointed at a closed port while the test keeps the victim away. */
    class GatedWebSocket extends WebSocket {
      constructor(url: string) {
        super(reachable ? url : 'ws://127.0.0.1:9/');
        sockets.push(this);
      }
    }
    const { connection } = await room.connect(0, { WebSocket: GatedWebSocket });
    const victim = await room.provider(0, { name: 'gone-while-away', connection });
    const presence: PresenceFrame[] = [];
    connection.on('presence', (frame) => presence.push(frame));
    const { connection: sender } = await room.connect(2);
    sendPieces(sender, id(0), { doc: 'gone-while-away', m: 'half', n: 10, size: 10_000, count: 5 });
    await eventually(() => victim.pendingReceiveBytes === 50_000, 'half the message held');
    reachable = false;
    sockets.at(-1)?.terminate();
    await eventually(() => connection.state !== 'joined', 'the victim cut off');
    await sender.close();
    expect(victim.pendingReceiveBytes).toBe(50_000);
    reachable = true;
    await eventually(() => connection.state === 'joined', 'the victim back');
    expect(connection.devices).not.toContain(id(2));
    // It learnt from the join's device list, not from a presence frame.
    expect(presence.filter((frame) => frame.device === id(2) && frame.state === 'left')).toEqual(
      [],
    );
    await eventually(() => victim.pendingReceiveBytes === 0, 'nothing held after the join');
  });

  it('drops what it holds when destroyed', async () => {
    const victim = await room.provider(0, { name: 'destroyed' });
    const { connection: sender } = await room.connect(2);
    sendPieces(sender, id(0), { doc: 'destroyed', m: 'half', n: 10, size: 10_000, count: 5 });
    await eventually(() => victim.pendingReceiveBytes === 50_000, 'half the message held');
    victim.destroy();
    expect(victim.pendingReceiveBytes).toBe(0);
    await sender.close();
  });

  it('drops the largest unfinished message when all of them pass maxReceiveBytes', async () => {
    const victim = await room.provider(0, { name: 'crowded', maxReceiveBytes: 100_000 });
    const watched = watch(victim);
    const { connection: big } = await room.connect(1);
    const { connection: other } = await room.connect(2);
    const piece = { doc: 'crowded', size: 10_000 };
    sendPieces(big, id(0), { ...piece, m: 'big', n: 10, count: 6 });
    await eventually(() => victim.pendingReceiveBytes === 60_000, 'the big one held');
    sendPieces(other, id(0), { ...piece, m: 'other', n: 10, count: 5 });
    await eventually(() => watched.received.get(id(2)) === 5, 'the other one at the victim');
    // 60,000 + 50,000 passed 100,000 at the other's fifth piece: the big one went.
    expect(victim.pendingReceiveBytes).toBe(50_000);
    expect(watched.mostHeld).toBe(100_000);
    expect(watched.errors.map((e) => [e.code, e.message.includes(`device ${id(1)} `)])).toEqual([
      ['receive_limit', true],
    ]);
    await Promise.all([big.close(), other.close()]);
  });

  for (const passphrase of [undefined, 'right one']) {
    it(`still receives a message larger than one relay frame whole (${passphrase === undefined ? 'plain' : 'encrypted'})`, async () => {
      const name = `large-${passphrase === undefined ? 'plain' : 'sealed'}`;
      const maxMessageBytes = 16_384;
      const sender = await room.provider(3, { name, passphrase, maxMessageBytes });
      const receiver = await room.provider(0, {
        name,
        passphrase,
        maxMessageBytes,
        maxReceiveBytes: 262_144,
      });
      const watched = watch(receiver);
      await Promise.all([sender.whenSynced(), receiver.whenSynced()]);
      const text = randomText(200_000);
      sender.doc.getText('text').insert(0, text);
      expect(await converged([sender, receiver])).toBe(text);
      // It came in pieces, held while they arrived and freed once whole.
      expect(watched.mostHeld).toBeGreaterThan(maxMessageBytes);
      // The text can be whole while a later message of the sender (with a passphrase, 160 to
      // 180 kB of pieces were seen held at that moment) is still arriving: freed once whole.
      await eventually(() => receiver.pendingReceiveBytes === 0, 'the pieces freed', 10_000);
      expect(watched.errors).toEqual([]);
    });
  }
});
