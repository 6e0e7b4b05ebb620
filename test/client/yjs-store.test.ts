import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as Y from 'yjs';
import { toBase64 } from '../../client/base64.ts';
import type { SyncError } from '../../client/errors.ts';
import type { RelayConnection } from '../../client/relay-connection.ts';
import type { StoreFrame } from '../../client/relay-frames.ts';
import { storeChunkBytes } from '../../client/store-frames.ts';
import type { YjsProvider } from '../../client/yjs-provider.ts';
import { StoreCursor } from '../../client/yjs-store-cursor.ts';
import { startTestHost, type TestHost } from '../helpers/host.ts';
import { eventually } from '../helpers/wait.ts';
import { exposes, storeFilesText } from './plaintext.ts';
import { openYjsRoom, type YjsRoom } from './yjs-room.ts';

/** The store's files (SQLite database, WAL, shared memory, chunk files) as they are on disk. */
function storeFiles(th: TestHost): string {
  return storeFilesText(join(th.dir, 'data'));
}

/** Every store frame a connection receives. */
function storeFrames(connection: RelayConnection): StoreFrame[] {
  const frames: StoreFrame[] = [];
  connection.on('store', (frame) => frames.push(frame));
  return frames;
}

describe('the Yjs provider and the host’s document store', () => {
  let th: TestHost;
  let room: YjsRoom;
  /** Moves the host's clock past the relay buffer (2 s) between devices. */
  let clockOffsetMs = 0;

  beforeAll(async () => {
    th = await startTestHost({
      ui: false,
      relay: ['buffer.seconds=2'],
      now: () => Date.now() + clockOffsetMs,
    });
    room = await openYjsRoom(th, 'store@example.org', 'notes', 5);
  });

  afterAll(async () => {
    await room?.close();
    await th?.close();
  });

  /** Opens a provider on device `index`, waits until it is synced, and says what it held then. */
  async function open(
    index: number,
    options: { name: string; passphrase?: string; doc?: Y.Doc; store?: StoreCursor },
  ): Promise<{ provider: YjsProvider; textAtSync: string; errors: SyncError[] }> {
    const provider = await room.provider(index, options);
    const errors: SyncError[] = [];
    provider.on('error', (error) => errors.push(error));
    await provider.whenSynced();
    return { provider, textAtSync: provider.doc.getText('text').toString(), errors };
  }

  /** Ends a device's session: nothing of it stays in the room, and the relay buffer expires. */
  async function leave(provider: YjsProvider): Promise<void> {
    await provider.flush();
    provider.destroy();
    await provider.connection.close();
    clockOffsetMs += 10_000;
  }

  for (const passphrase of [undefined, 'correct horse battery staple']) {
    const label = passphrase === undefined ? 'unencrypted' : 'encrypted';
    it(`brings a document to a device that was never online with the writer (${label})`, async () => {
      const name = `never-together-${label}`;
      const writer = await open(0, { name, passphrase });
      writer.provider.doc.getText('text').insert(0, `written on the laptop (${label})`);
      await leave(writer.provider);

      const reader = await open(1, { name, passphrase });
      // `synced` means caught up with the host: the text is there at that moment.
      expect(reader.textAtSync).toBe(`written on the laptop (${label})`);
      expect(reader.provider.peers).toEqual([]);
      expect(reader.errors).toEqual([]);
      await leave(reader.provider);
    });
  }

  it('sends what a device changed offline, deletions included, at its next connection', async () => {
    const name = 'offline-edits';
    const doc = new Y.Doc();
    const store = new StoreCursor();
    const first = await open(0, { name, doc, store });
    doc.getText('text').insert(0, 'one two three');
    await first.provider.flush();
    expect(store.position).toBeGreaterThan(0);
    await leave(first.provider);
    // Offline: a deletion (it does not advance the state vector) and an insertion.
    doc.getText('text').delete(0, 4);
    doc.getText('text').insert(doc.getText('text').length, ' four');
    // Later, the same device again with what it kept between runs.
    const kept = new StoreCursor(JSON.parse(JSON.stringify(store.progress())));
    const again = await open(0, { name, doc, store: kept });
    expect(again.textAtSync).toBe('two three four');
    await leave(again.provider);

    const other = await open(2, { name });
    expect(other.textAtSync).toBe('two three four');
    await leave(other.provider);
  });

  it('leaves the host only ciphertext and digests of an encrypted document (store.db and its WAL, byte for byte)', async () => {
    const name = 'diary-name-5d1e.md';
    const marker = 'stored-secret-3b8f';
    const writer = await open(0, { name, passphrase: 'pass phrase' });
    writer.provider.doc.getText('text').insert(0, `Dear diary, ${marker}`);
    await leave(writer.provider);
    const reader = await open(1, { name, passphrase: 'pass phrase' });
    expect(reader.textAtSync).toContain(marker);
    await leave(reader.provider);
    const files = storeFiles(th);
    expect(files).toContain(writer.provider.docKey);
    expect(exposes(files, marker)).toBe(false);
    expect(exposes(files, name)).toBe(false);
    expect(exposes(files, 'diary-name')).toBe(false);
  });

  it('appends the edits of one moment together: 300 keystrokes in one turn are one entry', async () => {
    const name = 'one-moment';
    const writer = await open(0, { name });
    const frames = storeFrames(writer.provider.connection);
    const text = writer.provider.doc.getText('text');
    for (let i = 0; i < 300; i += 1) text.insert(text.length, `${i % 10}`);
    await writer.provider.flush();
    expect(frames.filter((f) => f.type === 'appended')).toHaveLength(1);
    await leave(writer.provider);
    const reader = await open(3, { name });
    expect(reader.textAtSync).toBe(text.toString());
    await leave(reader.provider);
  });

  it('sends a large document the host lacks once, as a snapshot, and gets none of it back', async () => {
    const name = 'large-first';
    const doc = new Y.Doc();
    // 1.5 MiB made before the first connection: past what calls for a snapshot at once.
    doc.getText('text').insert(0, 'a line of text that is long enough\n'.repeat(45_000));
    const provider = await room.provider(0, { name, doc });
    const frames = storeFrames(provider.connection);
    await provider.whenSynced();
    await provider.flush();
    await eventually(
      () => provider.store.sinceSnapshot.bytes === 0,
      'the snapshot counted',
      15_000,
    );
    const pieces = Math.ceil(
      (Y.encodeStateAsUpdate(doc).length + 16) / storeChunkBytes(1_048_576, provider.docKey),
    );
    // One message (its pieces), not the diff and then a snapshot of the same content.
    expect(frames.filter((f) => f.type === 'appended')).toHaveLength(pieces);
    // The catch-up before a snapshot waits for the appends: none of them comes back.
    const returned = frames.flatMap((f) => (f.type === 'stored' ? f.entries : []));
    expect(returned).toEqual([]);
    await leave(provider);
    const reader = await open(3, { name });
    expect(reader.textAtSync).toBe(doc.getText('text').toString());
    await leave(reader.provider);
  });

  it('appends a large edit once, with no snapshot of the same bytes after it; one follows once the entries weigh twice the document', async () => {
    const name = 'large-edit';
    const writer = await open(0, { name });
    const frames = storeFrames(writer.provider.connection);
    const text = writer.provider.doc.getText('text');
    // 1.5 MiB in one edit: past 1 MiB, but a snapshot now would be these bytes again.
    text.insert(0, 'a line of text that is long enough\n'.repeat(45_000));
    await writer.provider.flush();
    const acknowledged = frames.filter((f) => f.type === 'appended').length;
    const reader = await open(3, { name });
    expect(reader.textAtSync).toBe(text.toString());
    await leave(reader.provider);
    await writer.provider.flush();
    expect(frames.filter((f) => f.type === 'appended')).toHaveLength(acknowledged);
    expect(writer.provider.store.sinceSnapshot.entries).toBe(1);
    // The text replaced by a short one and edited a little: the entries now weigh far more
    // than the document (measured again after 16 entries), and the snapshot is written.
    writer.provider.doc.transact(() => {
      text.delete(0, text.length);
      text.insert(0, 'short now');
    });
    await writer.provider.flush();
    for (let i = 0; i < 16; i += 1) {
      text.insert(text.length, '.');
      await writer.provider.flush();
    }
    // Counted since the snapshot: at most the last few one-character edits, not 1.5 MiB.
    await eventually(
      () => writer.provider.store.sinceSnapshot.bytes < 1_024,
      'a snapshot acknowledged',
      15_000,
    );
    await leave(writer.provider);
    const later = await open(4, { name });
    expect(later.textAtSync).toBe(`short now${'.'.repeat(16)}`);
    await leave(later.provider);
  });

  it('writes snapshots after many edits, and a new device rebuilds the document from them', async () => {
    const name = 'many-edits';
    const writer = await open(0, { name });
    const connection = writer.provider.connection;
    const frames = storeFrames(connection);
    const text = writer.provider.doc.getText('text');
    // One append each (edits of 0.3 s are appended together; flush sends them).
    for (let i = 0; i < 260; i += 1) {
      text.insert(text.length, `${i % 10}`);
      await writer.provider.flush();
    }
    await eventually(
      () =>
        frames.some((f) => f.type === 'appended') &&
        writer.provider.store.sinceSnapshot.entries < 100,
      'a snapshot acknowledged',
      15_000,
    );
    const { docKey } = writer.provider;
    await leave(writer.provider);
    // What a new device gets first is a snapshot, not 260 keystrokes.
    const { connection: raw } = await room.connect(4);
    const answers = storeFrames(raw);
    raw.sendStoreFrame({ type: 'catchup', doc: docKey, after: 0 });
    await eventually(() => answers.some((f) => f.type === 'caughtup'), 'caught up');
    const entries = answers.flatMap((f) => (f.type === 'stored' ? f.entries : []));
    expect(entries[0]?.covers).toBeGreaterThan(200);
    await raw.close();
    const reader = await open(3, { name });
    expect(reader.textAtSync).toBe(text.toString());
    expect(reader.textAtSync.length).toBe(260);
    await leave(reader.provider);
  });

  it('keeps the text when a device of another passphrase, or a forged snapshot, writes to the document', async () => {
    const name = 'contested';
    const passphrase = 'the right one';
    const writer = await open(0, { name, passphrase });
    writer.provider.doc.getText('text').insert(0, 'kept by the right devices');
    await writer.provider.flush();
    const { docKey, store } = writer.provider;
    await leave(writer.provider);

    // A device of another passphrase writes to the document, then files snapshots of junk:
    // under its own key (its own group: stored), and under the right key check value, which it
    // saw on the wire, with its own proof (refused: only a holder of the right key can file
    // there). A broken snapshot filed with the right proof (a device holding the key with a
    // bug) is stored, and a reader still rebuilds the text from the entries it covers.
    const { connection } = await room.connect(2);
    const frames = storeFrames(connection);
    const own = await open(4, { name, passphrase: 'a wrong one' });
    own.provider.doc.getText('text').insert(0, 'overwritten!');
    await own.provider.flush();
    const { deriveE2EKey } = await import('../../client/e2e-key.ts');
    const right = await deriveE2EKey(passphrase, room.roomId);
    const wrong = await deriveE2EKey('a wrong one', room.roomId);
    const junk = toBase64(new Uint8Array(64).fill(7));
    const covers = store.position;
    const snapshot = (ref: number, kc: string, kp: string) =>
      connection.sendStoreFrame({ type: 'append', doc: docKey, ref, data: junk, kc, kp, covers });
    snapshot(1, wrong.check, wrong.proof);
    snapshot(2, right.check, wrong.proof);
    snapshot(3, right.check, right.proof);
    await eventually(() => frames.length >= 3, 'three answers');
    // (a refusal is answered at once, a stored entry after its commit: compared by ref)
    const answers = frames.map((f) => [
      f.type,
      'ref' in f ? f.ref : 0,
      f.type === 'error' ? f.code : '',
    ]);
    expect(answers.sort((a, b) => Number(a[1]) - Number(b[1]))).toEqual([
      ['appended', 1, ''],
      ['error', 2, 'invalid_message'],
      ['appended', 3, ''],
    ]);
    await leave(own.provider);
    await connection.close();

    const reader = await open(1, { name, passphrase });
    expect(reader.textAtSync).toBe('kept by the right devices');
    expect(reader.errors.map((e) => e.code)).toEqual(
      expect.arrayContaining(['wrong_passphrase', 'decrypt_failed']),
    );
    await leave(reader.provider);
  });
});
