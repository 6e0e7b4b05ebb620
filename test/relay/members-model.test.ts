import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerProject, startTestHost, type TestHost } from '../helpers/host.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { authCall, type ListedProject, type TeamDevice } from '../helpers/team.ts';

/**
 * Model-based: random shares, role changes, removals (by the owner, by the administrator, a
 * member leaving), joins and appends of three people on one project against the real host.
 * After each step: a device joins exactly while its user is a member (with the role the model
 * says), a viewer's append is refused and an editor's stored, every connection made under a
 * membership that ended or changed is closed with 4003 while the others stay open, and nothing
 * the owner's device sends after a removal was acknowledged reaches the removed member.
 */

const secret = 'members-model-secret-0123456789abcdef';
const runs = Number(process.env.MEMBERS_MODEL_RUNS ?? 20);
const revocationDeadlineMs = 5_000;
const people = ['ann', 'bob', 'cat'] as const;
type Person = (typeof people)[number];
type Role = 'editor' | 'viewer';

type Step =
  | { kind: 'share'; who: Person; role: Role }
  | { kind: 'setRole'; who: Person; role: Role }
  | { kind: 'remove'; who: Person; by: 'owner' | 'self' | 'admin' }
  | { kind: 'join'; who: Person }
  | { kind: 'append'; who: Person };

const person = fc.constantFrom(...people);
const role = fc.constantFrom<Role>('editor', 'viewer');
const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant('share' as const), who: person, role }),
  fc.record({ kind: fc.constant('setRole' as const), who: person, role }),
  fc.record({
    kind: fc.constant('remove' as const),
    who: person,
    by: fc.constantFrom<'owner' | 'self' | 'admin'>('owner', 'self', 'admin'),
  }),
  fc.record({ kind: fc.constant('join' as const), who: person }),
  fc.record({ kind: fc.constant('join' as const), who: person }),
  fc.record({ kind: fc.constant('append' as const), who: person }),
);

/** The connection a person's device holds, and the role it was admitted with. */
interface Live {
  client: RelayClient;
  role: Role;
}

describe('project members, model-based against the real host', () => {
  let host: TestHost;
  let owner: TeamDevice;
  const devices = new Map<Person, TeamDevice>();
  let projects = 0;

  beforeAll(async () => {
    host = await startTestHost({ auth: [`AUTH_SECRET=${secret}`], ui: false });
    owner = await host.signIn('owner-model@example.com', 'owner laptop');
    for (const who of people) devices.set(who, await host.signIn(`${who}@example.com`, who));
    const tier = await host.admin('PUT', `/users/${owner.userId}/subscription`, {
      tier: 'team',
      expiresAt: null,
    });
    expect(tier.status).toBe(200);
  }, 60_000);

  afterAll(async () => {
    await host?.close();
  });

  const deviceOf = (who: Person): TeamDevice => devices.get(who) as TeamDevice;

  it('admits exactly the members, with their roles, and closes what a change ends', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 12 }), async (steps) => {
        const project = await registerProject(host.base, owner.deviceToken, `p${++projects}`);
        const members = new Map<Person, Role>();
        const grants = new Map<Person, string>();
        const live = new Map<Person, Live[]>();
        const clients: RelayClient[] = [];
        // the owner's device is in the room throughout: what it sends after a removal is
        // acknowledged must never reach the removed member
        const ownerClient = new RelayClient(host.relayUrl);
        clients.push(ownerClient);
        const ownerJoined = await ownerClient.join(
          project.roomId,
          owner.deviceId,
          owner.deviceToken,
        );
        expect(ownerJoined).toMatchObject({ type: 'joined' });
        const afterRemoval = new Map<Person, string[]>();
        const sharePath = `/auth/project/${project.id}/members`;
        const membersPath = (who: Person) => `${sharePath}/${deviceOf(who).userId}`;

        /** The project as `who` lists it; undefined when it is not listed. */
        async function listed(who: Person): Promise<ListedProject | undefined> {
          const res = await authCall(host.base, deviceOf(who).deviceToken, 'GET', '/auth/projects');
          const all = (res.body as { projects: ListedProject[] }).projects;
          return all.find((p) => p.id === project.id);
        }

        async function apply(s: Step): Promise<void> {
          const member = members.get(s.who);
          if (s.kind === 'share') {
            const res = await authCall(host.base, owner.deviceToken, 'POST', sharePath, {
              email: `${s.who}@example.com`,
              role: s.role,
            });
            expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
            members.set(s.who, s.role);
          } else if (s.kind === 'setRole') {
            const res = await authCall(host.base, owner.deviceToken, 'PATCH', membersPath(s.who), {
              role: s.role,
            });
            expect(res.status).toBe(member === undefined ? 404 : 200);
            if (member !== undefined) members.set(s.who, s.role);
          } else if (s.kind === 'remove') {
            const res =
              s.by === 'admin'
                ? await host.admin(
                    'DELETE',
                    `/projects/${project.id}/members/${deviceOf(s.who).userId}`,
                  )
                : await authCall(
                    host.base,
                    (s.by === 'owner' ? owner : deviceOf(s.who)).deviceToken,
                    'DELETE',
                    membersPath(s.who),
                  );
            // a person who is no longer a member cannot even see the project to leave it
            expect(res.status).toBe(member === undefined ? 404 : 204);
            members.delete(s.who);
            // acknowledged: from now on nothing of the project reaches them
            const secret = `after-removal-${Math.random().toString(36).slice(2)}`;
            afterRemoval.set(s.who, [...(afterRemoval.get(s.who) ?? []), secret]);
            ownerClient.send({ to: 'broadcast', payload: { secret } });
            ownerClient.send({ to: deviceOf(s.who).deviceId, payload: { secret } });
            await ownerClient.sync();
          } else if (s.kind === 'join') {
            await join(s.who, member);
          } else {
            await append(s.who, member);
          }
        }

        async function join(who: Person, member: Role | undefined): Promise<void> {
          const seen = await listed(who);
          expect(seen?.role).toBe(member);
          if (seen?.grant !== undefined) grants.set(who, seen.grant);
          const client = new RelayClient(host.relayUrl);
          clients.push(client);
          const device = deviceOf(who);
          // a person no longer listed tries the last grant it had (or none)
          const answer = await client.joinWithGrant(
            project.roomId,
            device.deviceId,
            device.deviceToken,
            grants.get(who),
          );
          if (member === undefined) {
            expect(answer).toMatchObject({ type: 'error', code: 'auth_failed' });
            expect((await client.waitClosed()).code).toBe(4001);
            return;
          }
          expect(answer).toMatchObject({ type: 'joined' });
          expect((answer.roles as Record<string, string>)[device.deviceId]).toBe(member);
          // one connection per device and room: the earlier one is replaced
          for (const earlier of live.get(who) ?? []) {
            expect((await earlier.client.waitClosed()).code).toBe(4009);
          }
          live.set(who, [{ client, role: member }]);
        }

        async function append(who: Person, member: Role | undefined): Promise<void> {
          const connection = live.get(who)?.at(-1);
          if (connection === undefined) return;
          expect(connection.role).toBe(member);
          const ref = Math.floor(Math.random() * 1e9);
          const data = Buffer.from(`${who} ${ref}`).toString('base64');
          connection.client.send({ type: 'append', doc: 'notes.md', ref, data });
          const answer = await connection.client.take(
            (f) => (f.type === 'appended' || f.type === 'error') && f.ref === ref,
          );
          expect(answer.type).toBe(member === 'editor' ? 'appended' : 'error');
          if (member === 'viewer') expect(answer.code).toBe('forbidden');
        }

        /** Connections of an ended or changed membership close with 4003; the rest stay. */
        async function checkConnections(): Promise<void> {
          for (const who of people) {
            const kept: Live[] = [];
            for (const connection of live.get(who) ?? []) {
              if (members.get(who) === connection.role) {
                await connection.client.sync();
                kept.push(connection);
              } else {
                const closed = await connection.client.waitClosed(revocationDeadlineMs);
                expect(closed.code).toBe(4003);
              }
              const received = JSON.stringify(connection.client.allMessages());
              for (const secret of afterRemoval.get(who) ?? []) {
                expect(received).not.toContain(secret);
              }
            }
            live.set(who, kept);
          }
        }

        try {
          for (const s of steps) {
            await apply(s);
            await checkConnections();
          }
        } finally {
          for (const client of clients) client.terminate();
          await authCall(host.base, owner.deviceToken, 'DELETE', `/auth/project/${project.id}`);
        }
      }),
      { numRuns: runs, endOnFailure: true },
    );
  }, 600_000);
});
