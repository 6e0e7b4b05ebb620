import { authCall as call } from '../test/helpers/auth-call.ts';

/**
 * The auth API calls that set up a shared project in the benches (bench/team-host.ts,
 * bench/cluster-team.ts): the same requests a device makes, with its device token.
 */

/** A call of the auth API at `base` with a device token; the answer's JSON body (or throws). */
export async function authCall(
  base: string,
  token: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<unknown> {
  const answer = await call(base, token, method, path, body);
  if (answer.status >= 300) {
    throw new Error(`${method} ${path}: ${answer.status} ${JSON.stringify(answer.body)}`);
  }
  return answer.body;
}

/** Registers a project of the token's user; its id and room id. */
export async function createProject(
  base: string,
  token: string,
  key: string,
): Promise<{ id: number; roomId: string }> {
  const body = { projectKey: key, name: `Project ${key}` };
  const answer = (await authCall(base, token, 'POST', '/auth/project', body)) as {
    project: { id: number; roomId: string };
  };
  return answer.project;
}

/** Shares project `projectId` with the user of `email` as an editor. */
export async function shareAsEditor(
  base: string,
  ownerToken: string,
  projectId: number,
  email: string,
): Promise<void> {
  const path = `/auth/project/${projectId}/members`;
  await authCall(base, ownerToken, 'POST', path, { email, role: 'editor' });
}

/** The room grants of the token's user, by project id, as `GET /auth/projects` lists them. */
export async function grantsOf(base: string, token: string): Promise<Map<number, string>> {
  const { projects } = (await authCall(base, token, 'GET', '/auth/projects')) as {
    projects: Array<{ id: number; grant?: string }>;
  };
  const grants = new Map<number, string>();
  for (const p of projects) if (p.grant !== undefined) grants.set(p.id, p.grant);
  return grants;
}
