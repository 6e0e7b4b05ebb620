import type { Express, Request, RequestHandler, Response } from 'express';
import { z } from 'zod';
import { memberRoles } from '../../protocol/room-grant.ts';
import type { Caller } from './device-service.ts';
import { emailSchema, idSchema, parseInput } from './schemas.ts';
import type { AuthService } from './service.ts';

const roleSchema = z.enum(memberRoles, { error: 'must be editor or viewer' });
const shareBody = z.object({ email: emailSchema, role: roleSchema });
const roleBody = z.object({ role: roleSchema });

export interface MemberRouteGuards {
  ready: RequestHandler;
  body: RequestHandler;
  authed: (req: Request, res: Response, next: () => void) => Promise<void>;
  caller: (req: Request) => Caller;
}

/**
 * Teams: a project's members (`/auth/project/:id/members`). Every id in the path is checked
 * against the caller: a project it neither owns nor is a member of is 404.
 */
export function addMemberRoutes(app: Express, service: AuthService, guards: MemberRouteGuards) {
  const { ready, body, authed, caller } = guards;
  const projectId = (req: Request) => parseInput(idSchema, req.params.id, 'id');
  const memberId = (req: Request) => parseInput(idSchema, req.params.userId, 'userId');

  app.get('/auth/project/:id/members', ready, authed, async (req, res) => {
    res.json(await service.members.members(caller(req), projectId(req)));
  });

  app.post('/auth/project/:id/members', ready, body, authed, async (req, res) => {
    const id = projectId(req);
    const { email, role } = parseInput(shareBody, req.body, 'body');
    const { member, created } = await service.members.share(caller(req), id, email, role);
    res.status(created ? 201 : 200).json({ member });
  });

  app.patch('/auth/project/:id/members/:userId', ready, body, authed, async (req, res) => {
    const id = projectId(req);
    const user = memberId(req);
    const { role } = parseInput(roleBody, req.body, 'body');
    res.json({ member: await service.members.setRole(caller(req), id, user, role) });
  });

  app.delete('/auth/project/:id/members/:userId', ready, authed, async (req, res) => {
    await service.members.remove(caller(req), projectId(req), memberId(req));
    res.status(204).end();
  });
}
