/**
 * The host of the shared-room case (bench/sections/shared.ts), in its own process (forked by
 * bench/run.ts and pinned like the other servers), so that its CPU time is the host's alone: the
 * real host (auth + co-hosted relay, `startTestHost`) with two rooms set up through its auth API.
 *   shared  the owner (on the `team` tier) shares a project with two other users as editors;
 *           3 devices each, the members' devices joining on their room grants
 *   solo    9 devices of one user (also on the `team` tier) in that user's own project's room
 * It reports `{kind:'team-ready', port, groups}` over IPC and answers `counters` and `close`.
 */
import { readFileSync } from 'node:fs';
import { startTestHost, type TestHost } from '../test/helpers/host.ts';
import type { DeviceGroup, TeamHostReport } from './protocol.ts';
import { createProject, grantsOf, shareAsEditor } from './team-api.ts';

/** Devices of each user. */
const devicesPerUser = 3;
/** The room grant check's secret (`AUTH_SECRET`); the devices' tokens are the host's own. */
const secret = 'bench-team-secret-0123456789abcdef01';

type Device = Awaited<ReturnType<TestHost['signIn']>>;

/** `count` devices of the user of `email`, each from a sign-in of its own. */
async function devicesOf(host: TestHost, email: string, count: number): Promise<Device[]> {
  const devices: Device[] = [];
  for (let i = 0; i < count; i++) devices.push(await host.signIn(email, `${email} ${i + 1}`));
  return devices;
}

/** A project of `owner`'s user on the `team` tier. */
async function teamProject(host: TestHost, owner: Device, key: string) {
  const tier = await host.admin('PUT', `/users/${owner.userId}/subscription`, {
    tier: 'team',
    expiresAt: null,
  });
  if (tier.status !== 200) throw new Error(`tier: ${tier.status}`);
  return createProject(host.base, owner.deviceToken, key);
}

/** The shared room (owner and two editors) and the one-user room, set up through the auth API. */
async function setUp(host: TestHost): Promise<DeviceGroup[]> {
  const owner = await devicesOf(host, 'owner@bench.example', devicesPerUser);
  const members = [
    await devicesOf(host, 'editor-a@bench.example', devicesPerUser),
    await devicesOf(host, 'editor-b@bench.example', devicesPerUser),
  ];
  const solo = await devicesOf(host, 'solo@bench.example', 3 * devicesPerUser);
  const shared = await teamProject(host, owner[0] as Device, 'bench-shared');
  for (const email of ['editor-a@bench.example', 'editor-b@bench.example']) {
    await shareAsEditor(host.base, (owner[0] as Device).deviceToken, shared.id, email);
  }
  const own = await teamProject(host, solo[0] as Device, 'bench-solo');
  const of = (d: Device, grant?: string) => ({ device: d.deviceId, token: d.deviceToken, grant });
  const sharedDevices = owner.map((d) => of(d));
  for (const member of members) {
    const grant = (await grantsOf(host.base, (member[0] as Device).deviceToken)).get(shared.id);
    if (grant === undefined) throw new Error('no grant for the shared project');
    sharedDevices.push(...member.map((d) => of(d, grant)));
  }
  return [
    { name: 'solo', room: own.roomId, devices: solo.map((d) => of(d)) },
    { name: 'shared', room: shared.roomId, devices: sharedDevices },
  ];
}

function cpuSeconds(): number {
  const stat = readFileSync('/proc/self/stat', 'latin1');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

const send = (report: TeamHostReport) => process.send?.(report);

const host = await startTestHost({
  auth: [`AUTH_SECRET=${secret}`],
  // the rate limit is sized never to drop, as in the single relay's bench
  relay: ['rate.perSecond=1000000', 'rate.burst=1000000'],
  ui: false,
});
const groups = await setUp(host);
process.on('message', (request: { kind: 'counters' | 'close' }) => {
  if (request.kind === 'counters') {
    const relay = host.host.relay;
    if (relay === undefined) throw new Error('the host has no relay');
    send({
      kind: 'counters',
      delivered: relay.metrics.messagesDelivered,
      cpuSeconds: cpuSeconds(),
    });
    return;
  }
  void host.close().then(() => process.exit(0));
});
send({ kind: 'team-ready', url: host.relayUrl, groups });
