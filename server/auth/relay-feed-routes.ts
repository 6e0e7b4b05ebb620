import type { Express, Request, RequestHandler, Response } from 'express';
import { z } from 'zod';
import type { RevocationEvent } from '../db/revocations.ts';
import { roomIds } from '../store/room-check.ts';
import { jsonBody } from './body.ts';
import { notFound, unauthorized } from './errors.ts';
import { bearer } from './request.ts';
import { idSchema, parseInput } from './schemas.ts';
import type { AuthService } from './service.ts';

/** Revocations per answer; a relay that is further behind asks again at once. */
export const feedPageSize = 500;
/** The longest a feed request is held open when there is nothing new. */
export const feedMaxWaitMs = 25_000;
/**
 * While a feed request waits, the database is asked again this often, for deletions made by
 * another auth process on the same database (this process's own wake the request at once).
 */
const feedRecheckMs = 2_000;

const feedQuery = z.object({
  since: z.coerce
    .number({ error: 'must be a sequence number' })
    .int({ error: 'must be a sequence number' })
    .min(0, { error: 'must be a sequence number' })
    .max(Number.MAX_SAFE_INTEGER, { error: 'must be a sequence number' }),
  waitMs: z.coerce
    .number({ error: 'must be a number of milliseconds' })
    .int({ error: 'must be a number of milliseconds' })
    .min(0, { error: 'must be a number of milliseconds' })
    .max(feedMaxWaitMs, { error: `must be at most ${feedMaxWaitMs}` })
    .default(0),
});

const roomCheckBody = z.object({
  rooms: roomIds,
  nonce: z.string().regex(/^[0-9a-f]{32}$/, { error: 'must be 32 hex digits' }),
});

/** Resolves after `ms`, at the next local revocation (a device or a membership), or when the client went away. */
function nextRevocation(service: AuthService, res: Response, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      stopListening();
      stopMembers();
      res.off('close', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    const stopListening = service.onDeviceRevoked(done);
    const stopMembers = service.onMembersRemoved(done);
    res.once('close', done);
  });
}

/** Revocations after `since`, waiting up to `waitMs` for one when there is none yet. */
async function revocationsAfter(
  service: AuthService,
  res: Response,
  since: number,
  waitMs: number,
): Promise<RevocationEvent[]> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const events = await service.revocationsSince(since, feedPageSize);
    const left = deadline - Date.now();
    if (events.length > 0 || left <= 0 || res.closed) return events;
    await nextRevocation(service, res, Math.min(left, feedRecheckMs));
  }
}

/**
 * The feed a relay running as its own process follows (`auth.url` in relay.conf), under
 * `/relay/`, authenticated with a credential made from the shared secret (never a device token):
 *
 * - `GET /relay/revocations?since=N&waitMs=W`: device deletions after sequence number N, oldest
 *   first, `{"revocations":[{"seq","deviceId","userId","revokedAt"}],"next":M,"reset":bool}`, and
 *   in the same order the memberships that ended (teams) as `{"seq","roomId","userId","memberId",
 *   "revokedAt"}`. With
 *   none yet the answer waits up to W ms (long poll) for one. `next` is the cursor to ask with
 *   next. `reset` is true when the relay may have missed deletions: N is beyond the latest one
 *   (a database restored or replaced; the list then starts from the beginning), or below the
 *   oldest one still kept (older ones were pruned, see `revocationRetentionMs`). The relay then
 *   checks its connected and cached devices again.
 * - `GET /relay/devices/:id`: `{"device":{"id","userId","tokenDigest"}}` of a device that exists,
 *   404 for one that was deleted or never issued: what the relay checks a join against.
 * - `POST /relay/rooms/check` with `{"rooms":[...],"nonce"}` (at most 500 rooms, a nonce of 32
 *   hex digits): `{"existing":[...]|null,"mac"}`, the rooms asked that still have a project (null
 *   when the database has no user at all and so cannot be trusted to delete), with a MAC of the
 *   shared secret over the nonce and both lists. The relay's document store forgets the others.
 */
export function addRelayFeedRoutes(
  app: Express,
  service: AuthService,
  ready: RequestHandler,
): void {
  const relayOnly = (req: Request, _res: Response, next: () => void) => {
    if (!service.isRelayCredential(bearer(req))) {
      throw unauthorized('missing or invalid relay credential');
    }
    next();
  };

  app.get('/relay/revocations', relayOnly, ready, async (req, res) => {
    const { since, waitMs } = parseInput(feedQuery, req.query, 'query');
    // The rows first, the bounds after: a prune in between then flags a reset rather than
    // hiding the rows it deleted.
    let events = await service.revocationsSince(since, feedPageSize);
    const { oldest, latest } = await service.revocationBounds();
    const replaced = since > latest;
    const reset = replaced || since < oldest - 1;
    if (replaced) events = await service.revocationsSince(0, feedPageSize);
    if (events.length === 0 && !reset) events = await revocationsAfter(service, res, since, waitMs);
    if (res.closed) return;
    res.set('Cache-Control', 'no-store');
    res.json({ revocations: events, next: events.at(-1)?.seq ?? (replaced ? 0 : since), reset });
  });

  app.post('/relay/rooms/check', relayOnly, ready, jsonBody, async (req, res) => {
    const { rooms, nonce } = parseInput(roomCheckBody, req.body, 'body');
    const answer = await service.roomCheck(nonce, rooms);
    res.set('Cache-Control', 'no-store');
    res.json(answer);
  });

  app.get('/relay/devices/:id', relayOnly, ready, async (req, res) => {
    const id = parseInput(idSchema, req.params.id, 'id');
    const device = await service.relayDevice(id);
    if (device === undefined) throw notFound('device');
    res.set('Cache-Control', 'no-store');
    res.json({ device: { id, ...device } });
  });
}
