import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NatsLink, openNatsLink } from '../../server/cluster/nats-link.ts';
import {
  answerRoomChecks,
  createNatsRoomDirectory,
  roomCheckSubject,
} from '../../server/cluster/nats-room-lookups.ts';
import { recordSealFor } from '../../server/cluster/record-seal.ts';
import { createLogger } from '../../server/log.ts';
import type { RoomDirectory } from '../../server/store/room-directory.ts';
import { type NatsServer, natsSkipReason, startNatsServer } from '../helpers/nats-server.ts';
import { eventually } from '../helpers/wait.ts';

/**
 * Room checks over NATS (which rooms of the cluster store still have a project): what an auth
 * process answers, and that a node deletes nothing on an answer without the shared secret's MAC
 * or without an answer.
 */

const skip = natsSkipReason();
const secret = 'room-check-secret-0123456789abcdef0123';
const options = { secret, logger: createLogger('silent'), now: Date.now, timeoutMs: 1_000 };

describe.skipIf(skip !== undefined)(
  `room checks over NATS${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    let nats: NatsServer;
    let link: NatsLink;
    beforeAll(async () => {
      nats = await startNatsServer();
      link = openNatsLink([nats.url], 'room-checks test', options.logger);
      await eventually(() => link.connected || undefined, 'NATS connected');
    });
    afterAll(async () => {
      await link?.close();
      await nats?.dispose();
    });

    it('answers which rooms exist, "unknown" when the database cannot be trusted, and not a wrong secret', async () => {
      let trusted = true;
      const database: RoomDirectory = {
        async existing(rooms) {
          return trusted ? new Set(rooms.filter((room) => room.startsWith('kept'))) : undefined;
        },
      };
      const answering = answerRoomChecks(link, database, options);
      try {
        const node = createNatsRoomDirectory(() => link, options);
        const many = Array.from({ length: 1_200 }, (_, i) => `${i % 2 ? 'kept' : 'gone'}-${i}`);
        const found = await node.existing(many);
        expect(found?.size).toBe(600);
        expect(found?.has('kept-1')).toBe(true);
        trusted = false;
        expect(await node.existing(['kept-1', 'gone-2'])).toBeUndefined();
        const stranger = createNatsRoomDirectory(() => link, { ...options, secret: `${secret}x` });
        await expect(stranger.existing(['gone-2'])).rejects.toThrow();
      } finally {
        answering.stop();
      }
    });

    it('refuses an answer without the MAC: nothing is said to be gone', async () => {
      const forger = await connect({ servers: nats.url });
      forger.subscribe(roomCheckSubject, {
        callback: (_err, msg) => {
          msg.respond(JSON.stringify({ existing: [], mac: '00' }));
        },
      });
      await forger.flush();
      try {
        const node = createNatsRoomDirectory(() => link, options);
        const seal = recordSealFor(secret);
        const before = seal.rejected;
        await expect(node.existing(['kept-1'])).rejects.toThrow(/MAC/);
        // counted with the records dropped for their seal (cluster.rejected on /health)
        expect(seal.rejected).toBe(before + 1);
      } finally {
        await forger.close();
      }
    });
  },
);
