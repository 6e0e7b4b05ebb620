import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { chooseSqliteEngine } from '../../server/db/sqlite-engine.ts';
import { createLogger } from '../../server/log.ts';
import { createRoomId } from '../../server/tokens.ts';
import { testSecret } from '../helpers/configs.ts';
import { readRelayDb, referenceCounts, rejoin, rows } from '../helpers/relay-buffer.ts';
import { type RelayHarness, startRelayHarness } from '../helpers/relay-harness.ts';
import { eventually } from '../helpers/wait.ts';

let harness: RelayHarness | undefined;

afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const roomDevicesTable = `
  CREATE TABLE roomDevices (room TEXT NOT NULL, device TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('present', 'absent', 'expired')),
    since INTEGER NOT NULL, gap INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (room, device)) WITHOUT ROWID;
  CREATE TABLE revokedDevices (device TEXT PRIMARY KEY, revokedAt INTEGER NOT NULL) WITHOUT ROWID;`;

/**
 * What both old files hold: devices 2 and 3 of `room` dropped at `droppedAt`; for 2 a direct
 * message (n 1) then a broadcast (n 2) also kept for 3, then a broadcast (n 3) kept only for 3.
 */
const kept = [
  { devices: ['2'], to: 2, n: 1 },
  { devices: ['2', '3'], to: 'broadcast', n: 2 },
  { devices: ['3'], to: 'broadcast', n: 3 },
] as const;

function oldFile(dir: string, room: string, droppedAt: number, schema: string): Database.Database {
  const db = new Database(join(dir, 'relay.db'));
  db.exec(roomDevicesTable + schema);
  const device = db.prepare('INSERT INTO roomDevices VALUES (?, ?, ?, ?, 0)');
  device.run(room, '2', 'absent', droppedAt);
  device.run(room, '3', 'absent', droppedAt);
  return db;
}

const frameText = (room: string, to: string | number, n: number) =>
  JSON.stringify({ from: 1, to, room, payload: { n } });

/** The layout before the bounds (no user_version): the frame copied in every device's row. */
function versionOneFile(dir: string, room: string, droppedAt: number): void {
  const db = oldFile(
    dir,
    room,
    droppedAt,
    `CREATE TABLE bufferedMessages (id INTEGER PRIMARY KEY AUTOINCREMENT, room TEXT NOT NULL,
       device TEXT NOT NULL, frame TEXT NOT NULL, bytes INTEGER NOT NULL);
     CREATE INDEX bufferedMessagesByDevice ON bufferedMessages (room, device, id);`,
  );
  const message = db.prepare(
    'INSERT INTO bufferedMessages (room, device, frame, bytes) VALUES (?, ?, ?, ?)',
  );
  for (const { devices, to, n } of kept) {
    const text = frameText(room, to, n);
    for (const device of devices) message.run(room, device, text, text.length);
  }
  db.close();
}

/**
 * Version 2 (user_version 2): each frame once, references by room and device, an index by frame;
 * plus a frame nothing refers to any more.
 */
function versionTwoFile(dir: string, room: string, droppedAt: number): void {
  const db = oldFile(
    dir,
    room,
    droppedAt,
    `CREATE TABLE bufferedFrames (id INTEGER PRIMARY KEY, user TEXT NOT NULL, frame TEXT NOT NULL,
       bytes INTEGER NOT NULL);
     CREATE INDEX bufferedFramesByUser ON bufferedFrames (user, id);
     CREATE TABLE bufferedMessages (room TEXT NOT NULL, device TEXT NOT NULL, frame INTEGER NOT NULL,
       PRIMARY KEY (room, device, frame)) WITHOUT ROWID;
     CREATE INDEX bufferedMessagesByFrame ON bufferedMessages (frame);
     CREATE TABLE bufferProbe (id INTEGER PRIMARY KEY CHECK (id = 1), at INTEGER NOT NULL);
     PRAGMA user_version = 2;`,
  );
  const frame = db.prepare(
    'INSERT INTO bufferedFrames (id, user, frame, bytes) VALUES (?, ?, ?, ?)',
  );
  const reference = db.prepare(
    'INSERT INTO bufferedMessages (room, device, frame) VALUES (?, ?, ?)',
  );
  const user = room.slice(0, room.indexOf('.'));
  frame.run(1, user, frameText(room, 'broadcast', 0), 10);
  kept.forEach(({ devices, to, n }, i) => {
    const text = frameText(room, to, n);
    frame.run(10 + i, user, text, text.length);
    for (const device of devices) reference.run(room, device, 10 + i);
  });
  db.close();
}

const userVersion = (dir: string) =>
  readRelayDb(dir, (db) => db.pragma('user_version', { simple: true }));

describe.each(['native', 'wasm'] as const)(
  'relay buffer: an older relay.db is migrated at start, on the %s SQLite engine',
  (engine) => {
    beforeAll(async () => {
      await chooseSqliteEngine(engine, createLogger('silent'));
    });

    it.each([
      // a copy per device before the bounds: each copy becomes a frame with one reference
      ['1 (before the bounds: a copy per device)', versionOneFile, [1, 1, 1, 1]],
      // the broadcast kept for two devices is one frame row counting two references
      ['2 (references by room and device, an index by frame)', versionTwoFile, [1, 2, 1]],
    ] as const)(
      'migrates version %s: every kept message is replayed, in order, once',
      async (_, write, refs) => {
        const dir = mkdtempSync(join(tmpdir(), 'relay-old-'));
        onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
        const room = createRoomId(1, testSecret);
        write(dir, room, Date.now());
        const relay = await startRelayHarness({ dir });
        harness = relay;
        expect(userVersion(dir)).toBe(3);
        expect(rows(dir)).toEqual({ frames: refs.length, references: 4 });
        expect(referenceCounts(dir)).toEqual({
          frames: refs.map((n) => ({ id: expect.any(Number), refs: n, references: n })),
          dangling: 0,
          devices: 2,
        });
        const two = await rejoin(relay, room, 1, 2);
        expect(two.joined).toMatchObject({ buffered: 2, gap: false });
        expect(two.payloads).toEqual([{ n: 1 }, { n: 2 }]);
        await eventually(() => rows(dir).references === 2, 'the references of device 2 gone');
        expect(referenceCounts(dir)).toMatchObject({ dangling: 0, devices: 1 });
        expect(referenceCounts(dir).frames.map((f) => [f.refs, f.references])).toEqual([
          [1, 1],
          [1, 1],
        ]);
        const three = await rejoin(relay, room, 1, 3);
        expect(three.joined).toMatchObject({ buffered: 2, gap: false });
        expect(three.payloads).toEqual([{ n: 2 }, { n: 3 }]);
        await eventually(() => rows(dir).frames === 0, 'every frame gone');
        expect(referenceCounts(dir)).toEqual({ frames: [], dangling: 0, devices: 0 });
      },
    );

    it('refuses to start on a relay.db of a newer layout, saying so, and leaves the file as it was', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'relay-new-'));
      onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
      const db = new Database(join(dir, 'relay.db'));
      db.exec('CREATE TABLE later (x INTEGER); PRAGMA user_version = 4;');
      db.close();
      await expect(startRelayHarness({ dir })).rejects.toThrow(
        /has layout 4, newer than this relay's \(3\)/,
      );
      expect(userVersion(dir)).toBe(4);
      expect(
        readRelayDb(dir, (file) =>
          file.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all(),
        ),
      ).toEqual(['later']);
    });
  },
);
