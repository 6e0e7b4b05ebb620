import type { Express, Request, RequestHandler, Response } from 'express';
import { z } from 'zod';
import type { Caller } from './device-service.ts';
import { AppError } from './errors.ts';
import { addMemberRoutes } from './member-routes.ts';
import { addPairingRoutes } from './pairing-routes.ts';
import { addRelayFeedRoutes } from './relay-feed-routes.ts';
import { bearer, clientOf } from './request.ts';
import {
  deviceInputSchema,
  emailSchema,
  idSchema,
  parseInput,
  rawString,
  text,
} from './schemas.ts';
import type { AuthService } from './service.ts';
import { addVerifyRoutes } from './verify-routes.ts';

const loginQuery = z.object({ email: emailSchema });
const magicLinkBody = z.object({ email: emailSchema });
const devicesBody = deviceInputSchema.extend({ jwt: rawString(4096).optional() });
const projectBody = z.object({ projectKey: text(255), name: text(255) });

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

  addVerifyRoutes(app, service, ready);

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

  addPairingRoutes(app, service, { ready, body, authed, caller });
  addMemberRoutes(app, service, { ready, body, authed, caller });
  addRelayFeedRoutes(app, service, ready);
}
