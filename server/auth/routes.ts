import type { Express, Request, RequestHandler, Response } from 'express';
import { z } from 'zod';
import { AppError } from './errors.ts';
import { sendPage, verifyPage } from './html.ts';
import { bearer, clientOf } from './request.ts';
import {
  deviceInputSchema,
  emailSchema,
  idSchema,
  parseInput,
  rawString,
  text,
} from './schemas.ts';
import type { AuthService, Caller } from './service.ts';

const loginQuery = z.object({ email: emailSchema });
const magicLinkBody = z.object({ email: emailSchema });
const verifyQuery = z
  .object({
    token: rawString(255),
    deviceName: text(255).optional(),
    platform: text(50).optional(),
  })
  .refine((q) => (q.deviceName === undefined) === (q.platform === undefined), {
    error: 'deviceName and platform must be given together',
    path: ['deviceName'],
  });
const devicesBody = deviceInputSchema.extend({ jwt: rawString(4096).optional() });
const projectBody = z.object({ projectKey: text(255), name: text(255) });

/** Whether the client prefers an HTML page (a browser opening the link). */
const wantsHtml = (req: Request): boolean =>
  req.accepts(['application/json', 'text/html']) === 'text/html';

/** What runs before the handlers: the readiness check (503) and the JSON body parser. */
export interface AuthRouteGuards {
  ready: RequestHandler;
  body: RequestHandler;
}

/**
 * The routes of contract section 4, registered on the app itself with their full paths: a
 * router mounted under /auth cost a tenth of a request in path trimming and a second dispatch
 * (bench: `GET /auth/device` against a bare express route). Bodies are parsed only on the
 * routes that take one, before the bearer check as before.
 */
export function addAuthRoutes(app: Express, service: AuthService, guards: AuthRouteGuards): void {
  const { ready, body } = guards;
  const callers = new WeakMap<Request, Caller>();

  const authed = async (req: Request, _res: Response, next: () => void) => {
    callers.set(req, await service.authenticate(bearer(req), clientOf(req)));
    next();
  };
  const caller = (req: Request): Caller => {
    const found = callers.get(req);
    if (!found) throw new AppError('unauthorized', 'missing or invalid bearer token');
    return found;
  };

  app.get('/auth/login', ready, async (req, res) => {
    const { email } = parseInput(loginQuery, req.query, 'query');
    await service.requestLink(email, clientOf(req));
    res.json({ sent: true });
  });

  app.post('/auth/magic-link', ready, body, async (req, res) => {
    const { email } = parseInput(magicLinkBody, req.body, 'body');
    await service.requestLink(email, clientOf(req));
    res.json({ sent: true });
  });

  app.get('/auth/verify', ready, async (req, res) => {
    res.set('Cache-Control', 'no-store').set('Referrer-Policy', 'no-referrer');
    const html = wantsHtml(req);
    try {
      const q = parseInput(verifyQuery, req.query, 'query');
      const device =
        q.deviceName !== undefined && q.platform !== undefined
          ? { deviceName: q.deviceName, platform: q.platform }
          : undefined;
      const result = await service.verify(q.token, device, clientOf(req));
      if (!html) {
        res.json(result);
        return;
      }
      const signedIn = `Signed in as ${result.user.email}.`;
      sendPage(
        res,
        200,
        'deviceToken' in result
          ? verifyPage('Signed in', `${signedIn} This device is registered.`, {
              label: 'Device token (paste it into your client as syncDeviceToken):',
              value: result.deviceToken,
            })
          : verifyPage(
              'Signed in',
              `${signedIn} Copy this sign-in code into your client; it is valid for 15 minutes.`,
              {
                label: 'Sign-in code (JWT):',
                value: result.jwt,
              },
            ),
      );
    } catch (err: unknown) {
      if (!html || !(err instanceof AppError)) throw err;
      if (err.retryAfterSeconds !== undefined)
        res.set('Retry-After', String(err.retryAfterSeconds));
      sendPage(res, err.status, verifyPage('Sign-in failed', err.message));
    }
  });

  app.post('/auth/devices', ready, body, async (req, res) => {
    const { jwt, deviceName, platform } = parseInput(devicesBody, req.body, 'body');
    const { deviceToken, device } = await service.registerDevice(bearer(req) ?? jwt, {
      deviceName,
      platform,
    });
    res.status(201).json({ deviceToken, device });
  });

  app.get('/auth/device', ready, authed, (req, res) => {
    const { device, user } = caller(req);
    res.json({ device, user });
  });

  app.get('/auth/devices', ready, authed, async (req, res) => {
    res.json({ devices: await service.listDevices(caller(req)) });
  });

  app.delete('/auth/device/:id', ready, authed, async (req, res) => {
    await service.deleteDevice(caller(req), parseInput(idSchema, req.params.id, 'id'));
    res.status(204).end();
  });

  app.post('/auth/project', ready, body, authed, async (req, res) => {
    const { projectKey, name } = parseInput(projectBody, req.body, 'body');
    const { created, project } = await service.registerProject(caller(req), projectKey, name);
    res.status(created ? 201 : 200).json({ project });
  });

  app.get('/auth/projects', ready, authed, async (req, res) => {
    res.json({ projects: await service.listProjects(caller(req)) });
  });

  app.delete('/auth/project/:id', ready, authed, async (req, res) => {
    await service.deleteProject(caller(req), parseInput(idSchema, req.params.id, 'id'));
    res.status(204).end();
  });

  app.get('/auth/subscription', ready, authed, async (req, res) => {
    res.json(await service.subscription(caller(req)));
  });
}
