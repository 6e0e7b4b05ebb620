import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fromBase64, toBase64 } from '../../client/base64.ts';
import type { SyncError } from '../../client/errors.ts';
import type { RelayConnection } from '../../client/relay-connection.ts';
import type { YjsProvider } from '../../client/yjs-provider.ts';
import { startTestHost, type TestHost } from '../helpers/host.ts';
import { eventually } from '../helpers/wait.ts';
import { converged, openYjsRoom, type YjsRoom } from './yjs-room.ts';

/** A small seeded generator (mulberry32), so a failing mutation can be found again. */
function seeded(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `bytes` changed one way: a byte flipped, set to 0xff (a huge length), cut, grown or doubled. */
function mutate(bytes: Uint8Array, random: () => number): Uint8Array {
  const at = Math.floor(random() * bytes.length);
  const copy = bytes.slice();
  switch (Math.floor(random() * 5)) {
    case 0:
      copy[at] = (copy[at] ?? 0) ^ (1 + Math.floor(random() * 255));
      return copy;
    case 1:
      copy[at] = 0xff;
      return copy;
    case 2:
      return copy.subarray(0, at);
    case 3:
      return Uint8Array.from([
        ...copy.subarray(0, at),
        Math.floor(random() * 256),
        ...copy.subarray(at),
      ]);
    default:
      return Uint8Array.from([...copy, ...copy.subarray(at)]);
  }
}

/** The provider payloads `connection` receives, as they came (to replay or alter them). */
function capture(connection: RelayConnection): Array<Record<string, unknown>> {
  const payloads: Array<Record<string, unknown>> = [];
  connection.on('message', (message) => {
    const payload = message.payload as Record<string, unknown>;
    if (payload.y === 1) payloads.push(payload);
  });
  return payloads;
}

/** Counts what `connection` receives from `from`, and the provider's errors. */
function watch(
  provider: YjsProvider,
  from: string,
): { errors: SyncError[]; received: () => number } {
  const errors: SyncError[] = [];
  let received = 0;
  provider.on('error', (error) => errors.push(error));
  provider.connection.on('message', (message) => {
    if (message.from === from) received += 1;
  });
  return { errors, received: () => received };
}

/**
 * A device of the same user that sends mutated or replayed Yjs messages: the provider reports
 * them, drops them and keeps syncing. (What an attack run found held; kept so.)
 */
describe('a Yjs provider receiving hostile messages', () => {
  let th: TestHost;
  let room: YjsRoom;
  const id = (index: number) => String(room.devices[index]!.deviceId);

  beforeAll(async () => {
    th = await startTestHost({ ui: false });
    room = await openYjsRoom(th, 'hostile-yjs@example.org', 'hostile', 3);
  });

  afterAll(async () => {
    await room?.close();
    await th?.close();
  });

  it('drops 400 mutated y-protocols messages and keeps syncing', async () => {
    const { connection: attacker } = await room.connect(1);
    const seen = capture(attacker);
    const victim = await room.provider(0, { name: 'mutated' });
    const peer = await room.provider(2, { name: 'mutated' });
    peer.doc.getText('text').insert(0, 'before the attack');
    await converged([victim, peer]);
    await eventually(() => seen.length >= 2 || undefined, 'real messages seen by the attacker');
    const watched = watch(victim, id(1));

    const random = seeded(22);
    for (let i = 0; i < 400; i += 1) {
      const real = seen[i % seen.length]!;
      const d = toBase64(mutate(fromBase64(String(real.d)) ?? new Uint8Array(), random));
      attacker.sendToDevice(id(0), { ...real, d });
    }
    await attacker.flush();
    await eventually(() => watched.received() === 400 || undefined, 'every mutated message');

    peer.doc.getText('text').insert(0, 'after: ');
    await eventually(
      () => victim.doc.getText('text').toString().includes('after: ') || undefined,
      'an edit after the attack',
    );
    // what the mutations made of valid updates stays in the victim's doc (a device of the user
    // may write anything); the doc is still whole and readable
    expect(victim.doc.getText('text').toString()).toContain('after: before the attack');
    expect(watched.errors.length).toBeGreaterThan(0);
    // it came to the victim alone: a device that syncs with it gets it, and the victim's edits
    victim.doc.getText('text').insert(0, '[victim] ');
    const late = await room.provider(2, { name: 'mutated' });
    const text = await converged([victim, late]);
    expect(text.startsWith('[victim] ') && text.includes('after: before the attack')).toBe(true);
    for (const error of watched.errors) {
      expect(error.code).toBe('invalid_payload');
      expect(error.message).toContain(`device ${id(1)}`);
    }
  });

  it('drops altered ciphertext and changes nothing with replayed ciphertext', async () => {
    const passphrase = 'hostile replay passphrase';
    const { connection: attacker } = await room.connect(1);
    const seen = capture(attacker);
    const writer = await room.provider(0, { name: 'sealed', passphrase });
    const reader = await room.provider(2, { name: 'sealed', passphrase });
    writer.doc.getText('text').insert(0, 'sealed text');
    const text = await converged([writer, reader]);
    await eventually(() => seen.length >= 2 || undefined, 'sealed messages seen by the attacker');
    const watched = watch(reader, id(1));

    const random = seeded(23);
    for (let i = 0; i < 100; i += 1) {
      const real = seen[i % seen.length]!;
      const bytes = fromBase64(String(real.d)) ?? new Uint8Array();
      // even: the same ciphertext again; odd: one byte of it changed
      const d = i % 2 === 0 ? real.d : toBase64(mutate(bytes, random));
      attacker.sendToDevice(id(2), { ...real, d });
    }
    await attacker.flush();
    await eventually(() => watched.received() === 100 || undefined, 'every replayed message');
    // opened one after the other, after they arrived: the integrity failure is said once
    await eventually(() => watched.errors.length > 0 || undefined, 'the altered ones refused');
    expect(watched.errors.map((e) => e.code)).toEqual(['decrypt_failed']);
    expect(reader.doc.getText('text').toString()).toBe(text);
    for (const error of watched.errors) expect(error.message).toContain(`device ${id(1)}`);
    writer.doc.getText('text').insert(0, 'still ');
    expect(await converged([writer, reader])).toBe(`still ${text}`);
  });
});
