import { expect } from 'vitest';
import { authCall } from './auth-call.ts';

export { authCall };

/** A signed-in device as the test hosts give it. */
export interface TeamDevice {
  userId: number;
  deviceId: number;
  deviceToken: string;
}

/** A project as `GET /auth/projects` lists it, with a member's grant. */
export interface ListedProject {
  id: number;
  roomId: string;
  role: string;
  grant?: string;
}

/** Shares project `projectId` of `owner` with `email` as `role`. */
export async function share(
  base: string,
  owner: TeamDevice,
  projectId: number,
  email: string,
  role: 'editor' | 'viewer',
): Promise<void> {
  const res = await authCall(
    base,
    owner.deviceToken,
    'POST',
    `/auth/project/${projectId}/members`,
    {
      email,
      role,
    },
  );
  expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
}

/** The project `projectId` as `device`'s user sees it in `GET /auth/projects`. */
export async function listedProject(
  base: string,
  device: TeamDevice,
  projectId: number,
): Promise<ListedProject> {
  const res = await authCall(base, device.deviceToken, 'GET', '/auth/projects');
  const found = (res.body as { projects: ListedProject[] }).projects.find(
    (p) => p.id === projectId,
  );
  if (found === undefined) throw new Error(`project ${projectId} is not listed`);
  return found;
}
