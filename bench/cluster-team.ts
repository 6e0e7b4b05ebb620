/**
 * The shared rooms of `npm run bench:cluster` on sync-host, set up through the auth API of an
 * auth process on the cluster's NATS (as a team's devices get them): 3 users with 3 devices
 * each; the owner (every user is on the `team` tier) registers `count` projects and shares each
 * with the two others as editors; the members join on the grants `GET /auth/projects` lists.
 */
import type { AuthProcess } from '../test/cluster/processes.ts';
import { createProject, grantsOf, shareAsEditor } from './team-api.ts';

/** Users of a shared room, and devices of each. */
export const teamUsers = 3;
export const devicesPerUser = 3;

/** One device's join of a shared room: its own token and, for a member's device, its grant. */
export interface TeamJoin {
  room: string;
  device: number;
  token: string;
  grant?: string;
}

/**
 * `count` shared rooms; in each, the devices of user u are at u * devicesPerUser + i (the
 * owner's first), every device in every room.
 */
export async function teamRooms(auth: AuthProcess, count: number): Promise<TeamJoin[][]> {
  const users: Array<Array<{ device: number; token: string }>> = [];
  for (let u = 0; u < teamUsers; u++) {
    const devices: Array<{ device: number; token: string }> = [];
    for (let i = 0; i < devicesPerUser; i++) {
      const signed = await auth.signIn(`team-${u}@bench.example`, `device ${i + 1}`);
      devices.push({ device: signed.device.id, token: signed.deviceToken });
    }
    users.push(devices);
  }
  const [owner, ...members] = users as [(typeof users)[number], ...typeof users];
  const ownerToken = (owner[0] as { token: string }).token;
  const projects: Array<{ id: number; roomId: string }> = [];
  for (let s = 0; s < count; s++) {
    const project = await createProject(auth.url, ownerToken, `bench-team-${s}`);
    for (let m = 1; m < teamUsers; m++) {
      await shareAsEditor(auth.url, ownerToken, project.id, `team-${m}@bench.example`);
    }
    projects.push(project);
  }
  const grants = await Promise.all(
    members.map((devices) => grantsOf(auth.url, (devices[0] as { token: string }).token)),
  );
  return projects.map((project) => [
    ...owner.map((d) => ({ room: project.roomId, ...d })),
    ...members.flatMap((devices, m) =>
      devices.map((d) => ({ room: project.roomId, ...d, grant: grants[m]?.get(project.id) })),
    ),
  ]);
}
