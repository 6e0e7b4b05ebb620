import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createAuthClient } from '../../client/auth-client.ts';
import { createLogger } from '../../server/log.ts';
import { createAuthRoomDirectory } from '../../server/relay/auth-feed.ts';
import { roomCheckMac } from '../../server/store/room-check.ts';
import { signRelayCredential } from '../../server/tokens.ts';
import { createCliRunner } from '../helpers/cli-process.ts';
import { writeConf } from '../helpers/configs.ts';
import { processScope } from '../helpers/process-scope.ts';
import { append, putChunk } from '../helpers/store-client.ts';
import { eventually } from '../helpers/wait.ts';

/**
 * A relay of its own process (`auth.url` in relay.conf) keeps documents in its own store.db. At
 * its sweep (every 30 s) it asks the auth service which rooms still have a project
 * (`POST /relay/rooms/check`) and forgets the documents, chunks and folder reports of the others.
 */

const secret = 'split-store-deletion-secret-0123456789abcdef';
const scope = processScope('sync-host-split-store-');
const runner = createCliRunner();
afterAll(() => runner.killAll());

function startAuth() {
  return scope.startAuth(scope.tempDir(), { AUTH_SECRET: secret, DEFAULT_TIER: 'pro' });
}

async function startRelay(authUrl: string) {
  const dir = scope.tempDir();
  writeConf(dir, 'relay.conf', {
    'auth.secret': secret,
    'auth.url': authUrl,
    'sqlite.path': './relay.db',
    'ws.port': 0,
    'status.port': 0,
    bind: '127.0.0.1',
  });
  const process = await scope.start(['relay'], dir);
  return { dir, url: await process.url('relay') };
}

/** The rooms that have documents, chunks or folder reports in the relay's store.db. */
function storedRooms(relayDir: string): string[] {
  const db = new Database(join(relayDir, 'store.db'), { readonly: true, fileMustExist: true });
  try {
    const union = ['documents', 'chunks', 'folderReports']
      .map((table) => `SELECT room FROM ${table}`)
      .join(' UNION ');
    const rows = db.prepare(`${union} ORDER BY room`).all() as { room: string }[];
    return rows.map((row) => row.room);
  } finally {
    db.close();
  }
}

const relayPost = (url: string, body: unknown, credential = signRelayCredential(secret, now())) =>
  fetch(`${url}/relay/rooms/check`, {
    method: 'POST',
    headers: { authorization: `Bearer ${credential}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
const now = () => Math.floor(Date.now() / 1000);
const nonce = 'a'.repeat(32);

describe('a relay with auth.url forgets the documents of deleted projects', () => {
  it('removes the documents, chunks and folder reports of a deleted project within a sweep, and keeps the others', {
    timeout: 120_000,
  }, async () => {
    const auth = await startAuth();
    const relay = await startRelay(auth.url);
    const client = createAuthClient({ authUrl: auth.url });
    await client.requestLogin('owner@example.org');
    const signed = await client.signIn(await auth.process.magicToken('owner@example.org'), {
      deviceName: 'laptop',
      platform: 'test',
    });
    const owner = createAuthClient({ authUrl: auth.url, deviceToken: signed.deviceToken });
    const gone = (await owner.registerProject('gone-key', 'Gone')).project;
    const kept = (await owner.registerProject('kept-key', 'Kept')).project;
    for (const project of [gone, kept]) {
      const member = scope.connect(relay.url);
      await member.join(project.roomId, signed.device.id, signed.deviceToken);
      expect(await append(member, 'notes.md', 1, 'text')).toMatchObject({ type: 'appended' });
      const chunk = Buffer.from(`a file of ${project.name}`);
      expect(await putChunk(member, 2, chunk)).toMatchObject({ type: 'chunk-stored' });
      member.send({ type: 'folder-report', doc: 'f', files: 1, bytes: chunk.length });
      await member.sync();
    }
    expect(storedRooms(relay.dir)).toEqual([gone.roomId, kept.roomId].sort());

    await owner.deleteProject(gone.id);
    await eventually(
      () => (storedRooms(relay.dir).length === 1 ? true : undefined),
      'the deleted project’s documents, chunks and folder reports removed',
      70_000,
    );
    expect(storedRooms(relay.dir)).toEqual([kept.roomId]);
  });

  it('answers a room check only to the relay credential, with the MAC of the shared secret', async () => {
    const auth = await startAuth();
    const client = createAuthClient({ authUrl: auth.url });
    await client.requestLogin('checker@example.org');
    const signed = await client.signIn(await auth.process.magicToken('checker@example.org'), {
      deviceName: 'laptop',
      platform: 'test',
    });
    const owner = createAuthClient({ authUrl: auth.url, deviceToken: signed.deviceToken });
    const { roomId } = (await owner.registerProject('check-key', 'Check')).project;
    const asked = [roomId, 'no-such-room'];

    const answer = await relayPost(auth.url, { rooms: asked, nonce });
    expect(answer.status).toBe(200);
    const body = (await answer.json()) as { existing: string[]; mac: string };
    expect(body.existing).toEqual([roomId]);
    expect(body.mac).toBe(roomCheckMac(secret, nonce, asked, [roomId]));

    // A device token, another secret's credential, or none: 401, nothing said about the rooms.
    for (const credential of [signed.deviceToken, signRelayCredential('x'.repeat(40), now()), '']) {
      const refused = await relayPost(auth.url, { rooms: asked, nonce }, credential);
      expect(refused.status).toBe(401);
      expect(JSON.stringify(await refused.json())).not.toContain(roomId);
    }
    // A malformed request: the contract's 400 with the field named.
    for (const bad of [
      { rooms: asked, nonce: 'short' },
      { rooms: Array(501).fill('r'), nonce },
      { rooms: 'all', nonce },
    ]) {
      const refused = await relayPost(auth.url, bad);
      expect(refused.status).toBe(400);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe(
        'invalid_request',
      );
    }
  });
});

describe('the relay side of a room check', () => {
  let server: Server | undefined;
  afterEach(() => server?.close());

  /** An HTTP server in the auth service's place that answers room checks with `answer`. */
  async function answering(answer: (body: { rooms: string[]; nonce: string }) => unknown) {
    server = createServer((req, res) => {
      let text = '';
      req.on('data', (part: Buffer) => {
        text += part.toString();
      });
      req.on('end', () => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify(answer(JSON.parse(text))));
      });
    });
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    const logger = createLogger('silent');
    return createAuthRoomDirectory({ url: `http://127.0.0.1:${address.port}`, secret, logger });
  }

  it('believes an answer with the MAC of the shared secret, asking 100 rooms at a time', async () => {
    const sizes: number[] = [];
    const rooms = Array.from({ length: 250 }, (_, i) => `room-${i}`);
    const directory = await answering(({ rooms: asked, nonce: n }) => {
      sizes.push(asked.length);
      const existing = asked.filter((room) => room.endsWith('7'));
      return { existing, mac: roomCheckMac(secret, n, asked, existing) };
    });
    const found = await directory.existing(rooms);
    expect([...(found ?? [])].sort()).toEqual(rooms.filter((room) => room.endsWith('7')).sort());
    expect(sizes).toEqual([100, 100, 50]);
  });

  it('rejects an answer without that MAC, so the sweep deletes nothing', async () => {
    const forged = await answering(({ rooms: asked, nonce: n }) => ({
      existing: [],
      mac: roomCheckMac('another-secret-0123456789abcdef0123456789', n, asked, []),
    }));
    await expect(forged.existing(['room-1'])).rejects.toThrow(/MAC/);
    const replayed = await answering(({ rooms: asked }) => ({
      existing: [],
      mac: roomCheckMac(secret, 'b'.repeat(32), asked, []),
    }));
    await expect(replayed.existing(['room-1'])).rejects.toThrow(/MAC/);
  });
});
