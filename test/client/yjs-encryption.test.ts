import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SyncError } from '../../client/errors.ts';
import type { YjsProvider } from '../../client/yjs-provider.ts';
import { joinRelay, startTestHost, type TestHost } from '../helpers/host.ts';
import { eventually } from '../helpers/wait.ts';
import { exposes, sqliteFilesText } from './plaintext.ts';
import { converged, openYjsRoom, type YjsRoom } from './yjs-room.ts';

/** The relay's SQLite files (database, journal, WAL) as they are on disk. */
function relayDbText(th: TestHost): string {
  return sqliteFilesText(join(th.dir, 'data'), 'relay.db');
}

function errorsOf(provider: YjsProvider): SyncError[] {
  const errors: SyncError[] = [];
  provider.on('error', (error) => errors.push(error));
  return errors;
}

describe('end-to-end encryption of the Yjs provider', () => {
  let th: TestHost;
  let room: YjsRoom;
  const logs: string[] = [];
  /** Every frame a plain relay client of the same user (device 2) received in the room. */
  const tapped: string[] = [];

  beforeAll(async () => {
    th = await startTestHost({ ui: false, logs });
    room = await openYjsRoom(th, 'secret@example.org', 'diary', 5);
    const tap = room.devices[2]!;
    const { socket } = await joinRelay(th.relayUrl, room.roomId, tap.deviceId, tap.deviceToken);
    socket.on('message', (data) => tapped.push(String(data)));
    // Device 3 joins once and drops without leaving: the relay keeps what is sent to it in relay.db.
    const { connection } = await room.connect(3);
    await connection.close({ leave: false });
  });

  afterAll(async () => {
    await room?.close();
    await th?.close();
  });

  /**
   * Two devices edit `name`; resolves when both hold `marker` and the relay buffered for device
   * 3, with the name the relay saw (a digest with a passphrase).
   */
  async function exchange(name: string, marker: string, passphrase?: string) {
    const a = await room.provider(0, { name, passphrase });
    const b = await room.provider(1, { name, passphrase });
    await Promise.all([a.whenSynced(), b.whenSynced()]);
    a.doc.getText('text').insert(0, `Dear diary: ${marker}. `);
    b.doc.getText('text').insert(0, `And ${marker} again. `);
    a.awareness.setLocalStateField('user', { name: marker });
    const text = await converged([a, b]);
    expect(text).toContain(marker);
    await Promise.all([a.flush(), b.flush()]);
    const wireName = a.docKey;
    await eventually(
      () => relayDbText(th).includes(`"doc":"${wireName}"`),
      'frames buffered in relay.db',
    );
    await eventually(
      () => tapped.some((frame) => frame.includes(`"doc":"${wireName}"`)),
      'frames tapped',
    );
    a.destroy();
    b.destroy();
    return wireName;
  }

  it('lets the relay read the text of an unencrypted document (the check below can see it)', async () => {
    const marker = 'plain-marker-7f3a';
    await exchange('plain', marker);
    expect(exposes(tapped.join('\n'), marker)).toBe(true);
    expect(exposes(relayDbText(th), marker)).toBe(true);
  });

  it('with a passphrase, leaves only ciphertext in the relay frames, relay.db and the host logs', async () => {
    const marker = 'secret-marker-91c2';
    const wireName = await exchange('sealed', marker, 'correct horse battery staple');
    // The document's name is not on the wire either: a keyed digest stands for it.
    expect(wireName).toMatch(/^h[\w-]{43}$/);
    expect(tapped.some((frame) => frame.includes('sealed'))).toBe(false);
    const sealedFrames = tapped.filter((frame) => frame.includes(`"doc":"${wireName}"`));
    expect(sealedFrames.length).toBeGreaterThan(0);
    expect(sealedFrames.every((frame) => frame.includes('"kc":"'))).toBe(true);
    expect(exposes(sealedFrames.join('\n'), marker)).toBe(false);
    expect(exposes(relayDbText(th), marker)).toBe(false);
    expect(logs.length).toBeGreaterThan(0);
    expect(exposes(logs.join('\n'), marker)).toBe(false);
  });

  it('refuses a device with a wrong passphrase, or none, with an error and leaves every document as it was', async () => {
    const name = 'locked';
    const errors: Record<string, SyncError[]> = {};
    /** A provider whose errors are recorded from its first moment. */
    const open = async (key: string, index: number, passphrase?: string) => {
      const provider = await room.provider(index, { name, passphrase });
      errors[key] = errorsOf(provider);
      return provider;
    };
    const a = await open('a', 0, 'right one');
    const c = await open('c', 4, 'right one');
    const b = await open('b', 1, 'wrong one');
    const plain = await open('plain', 3);
    a.doc.getText('text').insert(0, 'from A. ');
    b.doc.getText('text').insert(0, 'from B. ');
    plain.doc.getText('text').insert(0, 'from plain. ');
    // C, with the right passphrase, gets A's text: messages flowed to everyone.
    await eventually(() => c.doc.getText('text').toString() === 'from A. ', 'A at C');
    const bId = String(room.devices[1]!.deviceId);
    await eventually(
      () =>
        errors.a!.some(
          (e) => e.code === 'wrong_passphrase' && e.message.includes(`device ${bId} `),
        ),
      'wrong_passphrase at A',
    );
    await eventually(
      () => errors.b!.some((e) => e.code === 'wrong_passphrase'),
      'wrong_passphrase at B',
    );
    await eventually(
      () => errors.plain!.some((e) => e.code === 'encrypted'),
      'encrypted at the plain device',
    );
    await eventually(() => errors.a!.some((e) => e.code === 'not_encrypted'), 'not_encrypted at A');
    // The relay routed everything B and the plain device sent before their pongs, and wrote it
    // to A and C before their own pongs: all of it has reached them, and was dropped.
    await b.flush();
    await plain.flush();
    await Promise.all([a.flush(), c.flush()]);
    expect(a.doc.getText('text').toString()).toBe('from A. ');
    expect(c.doc.getText('text').toString()).toBe('from A. ');
    expect(b.doc.getText('text').toString()).toBe('from B. ');
    expect(plain.doc.getText('text').toString()).toBe('from plain. ');
    expect(errors.c!.map((e) => e.code).sort()).toEqual(['not_encrypted', 'wrong_passphrase']);
  });

  it('refuses an empty passphrase', async () => {
    const { connection } = await room.connect(4);
    await expect(
      room.provider(4, { name: 'empty', passphrase: '', connection }),
    ).rejects.toMatchObject({ code: 'invalid_passphrase' });
  });
});
