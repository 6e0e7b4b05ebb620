import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { TokenSignature } from '../../server/config/common.ts';
import { createRoomId, signDeviceToken } from '../../server/tokens.ts';
import { type DbTarget, dbTargets } from '../helpers/databases.ts';
import { startTestHost, type TestHost } from '../helpers/host.ts';
import { freePort } from '../helpers/ports.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { startTcpProxy } from '../helpers/tcp-proxy.ts';
import { eventually } from '../helpers/wait.ts';

const secret = 'cohosted-revocation-secret-0123456789abcdef';

describe('a co-hosted relay checks joins against the auth database', () => {
  let host: TestHost | undefined;
  const clients: RelayClient[] = [];
  afterEach(async () => {
    for (const client of clients.splice(0)) client.terminate();
    await host?.close();
    host = undefined;
  });

  async function start(signature: TokenSignature) {
    host = await startTestHost({
      auth: [`TOKEN_SIGNATURE=${signature}`, `AUTH_SECRET=${secret}`],
      ui: false,
    });
    return host;
  }

  async function join(room: string, deviceId: number, token: string) {
    const client = new RelayClient(host?.relayUrl ?? '');
    clients.push(client);
    return { client, answer: await client.join(room, deviceId, token) };
  }

  async function refused(room: string, deviceId: number, token: string) {
    const { client, answer } = await join(room, deviceId, token);
    expect(answer, `device ${deviceId}`).toMatchObject({ type: 'error', code: 'auth_failed' });
    expect((await client.waitClosed()).code).toBe(4001);
  }

  /** A token signed with the secret but never issued: what a forger of djb2 can make. */
  const forge = (signature: TokenSignature, userId: number, deviceId: number) =>
    signDeviceToken(
      { userId, deviceId, issuedAt: Math.floor(Date.now() / 1000) + 1 },
      secret,
      signature,
    );

  for (const signature of ['djb2', 'hmac-sha256'] as const) {
    it(`refuses signed tokens that were never issued (${signature}): an unknown device id, a deleted device, another user’s room`, async () => {
      const h = await start(signature);
      const mine = await h.signIn('attacker@example.com', 'mine');
      const spare = await h.signIn('attacker@example.com', 'spare');
      const victim = await h.signIn('victim@example.com', 'victim');
      const myRoom = createRoomId(mine.userId, secret);
      const victimRoom = createRoomId(victim.userId, secret);

      expect((await join(myRoom, mine.deviceId, mine.deviceToken)).answer).toMatchObject({
        type: 'joined',
      });
      await refused(
        myRoom,
        victim.deviceId + 1000,
        forge(signature, mine.userId, victim.deviceId + 1000),
      );
      // a token of an existing device, signed again: not the one issued
      await refused(myRoom, mine.deviceId, forge(signature, mine.userId, mine.deviceId));
      const removed = await fetch(`${h.base}/auth/device/${spare.deviceId}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${mine.deviceToken}` },
      });
      expect(removed.status).toBe(204);
      await refused(myRoom, spare.deviceId, forge(signature, mine.userId, spare.deviceId));
      await refused(myRoom, spare.deviceId, spare.deviceToken);
      await refused(victimRoom, victim.deviceId, forge(signature, victim.userId, victim.deviceId));
      await refused(victimRoom, mine.deviceId, forge(signature, victim.userId, mine.deviceId));
      expect((await join(victimRoom, victim.deviceId, victim.deviceToken)).answer).toMatchObject({
        type: 'joined',
      });
    });
  }

  it('handles frames sent right behind a join in order once the device is looked up', async () => {
    const h = await start('hmac-sha256');
    const first = await h.signIn('pipelined@example.com', 'first');
    const second = await h.signIn('pipelined@example.com', 'second');
    const room = createRoomId(first.userId, secret);
    const { client: receiver } = await join(room, first.deviceId, first.deviceToken);
    const sender = new RelayClient(h.relayUrl);
    clients.push(sender);
    await sender.opened;
    sender.send({ type: 'join', room, device: second.deviceId, token: second.deviceToken });
    for (let n = 0; n < 5; n++) sender.send({ to: 'host', payload: { n } });
    expect(await sender.next('joined')).toMatchObject({ role: 'member' });
    for (let n = 0; n < 5; n++) {
      expect(await receiver.message()).toMatchObject({ from: second.deviceId, payload: { n } });
    }
    expect(sender.frames.filter((frame) => frame.type === 'error')).toEqual([]);
  });
});

const postgres = (await dbTargets()).find((target) => target.name === 'postgres');

describe.skipIf(postgres?.skip !== undefined)(
  `a co-hosted relay while the auth database is unreachable${postgres?.skip ? ` (skipped: ${postgres.skip})` : ''}`,
  () => {
    const clients: RelayClient[] = [];
    const cleanups: Array<() => Promise<void>> = [];
    afterEach(async () => {
      for (const client of clients.splice(0)) client.terminate();
      for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    });

    it('lets the cache and the signature decide, keeps revoked devices out, and checks again once it is back', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'sync-host-outage-'));
      const db = await (postgres as DbTarget).create(dir);
      cleanups.push(async () => {
        await db.drop();
        rmSync(dir, { recursive: true, force: true });
      });
      const proxy = await startTcpProxy('127.0.0.1', 5432);
      cleanups.push(() => proxy.close());
      const config = db.config as { database: string };
      const port = await freePort();
      const h = await startTestHost({
        auth: [
          `PORT=${port}`,
          `AUTH_BASE_URL=http://127.0.0.1:${port}`,
          `AUTH_SECRET=${secret}`,
          'DB_DRIVER=postgres',
          'DB_HOST=127.0.0.1',
          `DB_PORT=${proxy.port}`,
          'DB_USER=postgres',
          'DB_PASS=',
          `DB_NAME=${config.database}`,
        ],
        ui: false,
      });
      cleanups.push(() => h.close());
      const joinAs = async (room: string, deviceId: number, token: string) => {
        const client = new RelayClient(h.relayUrl);
        clients.push(client);
        return client.join(room, deviceId, token);
      };
      const known = await h.signIn('outage@example.com', 'known');
      const unseen = await h.signIn('outage@example.com', 'unseen');
      const deleted = await h.signIn('outage@example.com', 'deleted');
      const room = createRoomId(known.userId, secret);
      expect(await joinAs(room, known.deviceId, known.deviceToken)).toMatchObject({
        type: 'joined',
      });
      const removed = await fetch(`${h.base}/auth/device/${deleted.deviceId}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${known.deviceToken}` },
      });
      expect(removed.status).toBe(204);
      const neverIssued = signDeviceToken(
        { userId: known.userId, deviceId: known.deviceId, issuedAt: 1 },
        secret,
        'hmac-sha256',
      );

      await proxy.cut();
      expect(await joinAs(room, known.deviceId, known.deviceToken)).toMatchObject({
        type: 'joined',
      });
      expect(await joinAs(room, known.deviceId, neverIssued)).toMatchObject({
        code: 'auth_failed',
      });
      expect(await joinAs(room, unseen.deviceId, unseen.deviceToken)).toMatchObject({
        type: 'joined',
      });
      expect(await joinAs(room, deleted.deviceId, deleted.deviceToken)).toMatchObject({
        code: 'auth_failed',
      });

      await proxy.restore();
      const forged = signDeviceToken(
        { userId: known.userId, deviceId: unseen.deviceId + 1000, issuedAt: 1 },
        secret,
        'hmac-sha256',
      );
      await eventually(
        async () => (await joinAs(room, unseen.deviceId + 1000, forged)).code === 'auth_failed',
        'the relay to check devices against the database again',
        10_000,
      );
    });
  },
);
