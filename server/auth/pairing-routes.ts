import type { Express, Request, RequestHandler } from 'express';
import { z } from 'zod';
import type { Caller } from './device-service.ts';
import { clientOf } from './request.ts';
import { deviceInputSchema, emailSchema, parseInput } from './schemas.ts';
import type { AuthService } from './service.ts';

const pairBody = deviceInputSchema.extend({ email: emailSchema.optional() });
/** A code as typed: validated loosely here, an unknown or malformed one is 404 (and counted). */
export const codeSchema = z
  .string({ error: 'must be a string' })
  .trim()
  .min(1, { error: 'must not be empty' })
  .max(32, { error: 'must be at most 32 characters' });
const codeBody = z.object({ code: codeSchema });
/** With `deviceName`, the approval holds only for a waiting device of that name. */
const approveBody = codeBody.extend({ deviceName: deviceInputSchema.shape.deviceName.optional() });
const pairingIdBody = z.object({ pairingId: z.string().max(128, { error: 'is too long' }) });
const pairingIdParam = z.string().max(128, { error: 'is too long' });

/** The handlers pairing shares with the other routes of the auth service. */
export interface PairingRouteGuards {
  ready: RequestHandler;
  body: RequestHandler;
  /** Checks the bearer device token and remembers the caller. */
  authed: RequestHandler;
  caller(req: Request): Caller;
}

/**
 * Pairing (a device joining by a short code): start, poll, and approve or deny from a device
 * that is signed in. The admin API approves and denies too (server/admin/routes.ts).
 */
export function addPairingRoutes(
  app: Express,
  service: AuthService,
  guards: PairingRouteGuards,
): void {
  const { ready, body, authed, caller } = guards;
  const { pairing } = service;

  app.post('/auth/pair', ready, body, async (req, res) => {
    const input = parseInput(pairBody, req.body, 'body');
    res.status(201).json(await pairing.create(input, clientOf(req)));
  });

  app.get('/auth/pair/:pairingId', ready, async (req, res) => {
    res.set('Cache-Control', 'no-store');
    const id = parseInput(pairingIdParam, req.params.pairingId, 'pairingId');
    const answer = await pairing.poll(id, clientOf(req));
    res.status(answer.status === 'approved' ? 200 : 202).json(answer);
  });

  app.post('/auth/pair/approve', ready, body, authed, async (req, res) => {
    const { code, deviceName } = parseInput(approveBody, req.body, 'body');
    const { user, device } = caller(req);
    const approved = await pairing.approveCode(
      code,
      { via: 'device', user, device },
      clientOf(req),
      deviceName,
    );
    // the new device accepts the account before it gets its token
    res.json({ device: approved.device, awaiting: 'acceptance' });
  });

  app.post('/auth/pair/describe', ready, body, authed, async (req, res) => {
    const { code } = parseInput(codeBody, req.body, 'body');
    const { user, device } = caller(req);
    const waiting = await pairing.describeCode(
      code,
      { via: 'device', user, device },
      clientOf(req),
    );
    res.json({ pairing: waiting });
  });

  app.post('/auth/pair/accept', ready, body, async (req, res) => {
    const { pairingId } = parseInput(pairingIdBody, req.body, 'body');
    await pairing.accept(pairingId, clientOf(req));
    res.status(204).end();
  });

  app.post('/auth/pair/decline', ready, body, async (req, res) => {
    const { pairingId } = parseInput(pairingIdBody, req.body, 'body');
    await pairing.decline(pairingId, clientOf(req));
    res.status(204).end();
  });

  app.post('/auth/pair/deny', ready, body, authed, async (req, res) => {
    const { code } = parseInput(codeBody, req.body, 'body');
    const { user, device } = caller(req);
    await pairing.denyCode(code, { via: 'device', user, device }, clientOf(req));
    res.status(204).end();
  });
}
