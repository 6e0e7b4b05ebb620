/**
 * The shared-room case (`--only=shared`, part of `npm run bench:relay`): the real host (auth +
 * co-hosted relay, bench/team-host.ts) with a room shared through project membership (the
 * owner on the `team` tier shares the project with two users as editors; 3 users, 3 devices
 * each, the members' devices joining on their room grants) and a room of 9 devices of one user.
 * The same traffic in both, window by window alternately: CPU per delivered message of the host
 * process, broadcast (to the 8 others) and direct (to the next device); then join latency (the
 * join frame sent to `joined` received, one join at a time, each device leaving and joining
 * again), alternately in both rooms.
 */
import type { BenchOptions } from '../options.ts';
import { type Child, type LoadChild, type Processes, sleep } from '../processes.ts';
import type { Counters, LoadCommand, TeamHostReport } from '../protocol.ts';
import { medianWithSpread, print, ratio, record } from '../stats.ts';

type HostChild = Child<TeamHostReport>;
const roomNames = ['solo', 'shared'] as const;

/** Closed loop in room `room` only: host CPU per message delivered over the window. */
async function roomWindow(
  options: BenchOptions,
  host: HostChild,
  load: LoadChild,
  room: number,
  mode: 'broadcast' | 'direct',
): Promise<number> {
  const { plan } = options;
  const command: LoadCommand = {
    kind: 'throughput',
    room,
    mode,
    window: 64,
    warmupMs: plan.warmupMs,
  };
  load.send(command);
  await load.next('measuring');
  const counters = (): Promise<Counters> => host.ask({ kind: 'counters' }, 'counters');
  const c0 = await counters();
  await sleep(plan.measureMs);
  const c1 = await counters();
  load.send({ kind: 'stop' } satisfies LoadCommand);
  await load.next('stopped');
  return ((c1.cpuSeconds - c0.cpuSeconds) / (c1.delivered - c0.delivered)) * 1e6;
}

/** One round: a fresh host, both rooms joined, windows alternating between the rooms. */
async function sharedRound(options: BenchOptions, procs: Processes, round: number) {
  const { plan } = options;
  const host = procs.fork<TeamHostReport>('team-host.ts', [], []);
  const { url, groups } = await host.next('team-ready');
  const load = procs.load('relay');
  await load.ask({ kind: 'release' } satisfies LoadCommand, 'released');
  await load.ask({ kind: 'connect-groups', url, groups } satisfies LoadCommand, 'connected');
  for (const mode of ['broadcast', 'direct'] as const) {
    for (let window = 0; window <= plan.windows; window++) {
      process.stderr.write(`shared round ${round}: ${mode} window ${window}/${plan.windows}\n`);
      // the order of the two rooms alternates, so that a trend in the machine's load is shared
      const order = window % 2 === 0 ? [0, 1] : [1, 0];
      for (const room of order) {
        const us = await roomWindow(options, host, load, room, mode);
        if (window > 0) record(`shared.${roomNames[room]}.${mode}.us`, us);
      }
    }
  }
  for (let window = 0; window <= plan.windows; window++) {
    for (const room of window % 2 === 0 ? [0, 1] : [1, 0]) {
      const { joinMs } = await load.ask(
        { kind: 'rejoin', room, rounds: 1 } satisfies LoadCommand,
        'rejoined',
      );
      if (window > 0) for (const ms of joinMs) record(`shared.${roomNames[room]}.join.ms`, ms);
    }
  }
  await load.ask({ kind: 'release' } satisfies LoadCommand, 'released');
  const exited = new Promise((resolve) => host.proc.once('exit', resolve));
  host.send({ kind: 'close' });
  await Promise.race([exited, sleep(5_000)]);
  if (host.proc.exitCode === null) host.proc.kill('SIGKILL');
}

export async function runShared(options: BenchOptions, procs: Processes): Promise<void> {
  for (let round = 1; round <= options.plan.rounds; round++) {
    await sharedRound(options, procs, round);
  }
}

/** The shared room against the one-user room: the table and the ratios. */
export function reportShared(): void {
  print();
  print('Shared room (3 users, 3 devices each, on room grants) against one user’s 9 devices:');
  print('| measure (median, min–max) | one-user room | shared room |');
  print('|---|---|---|');
  const row = (label: string, key: string, digits: number) =>
    print(
      `| ${label} | ${medianWithSpread(`shared.solo.${key}`, digits)} | ${medianWithSpread(`shared.shared.${key}`, digits)} |`,
    );
  row('broadcast to 8: host CPU µs per delivered message', 'broadcast.us', 2);
  row('direct: host CPU µs per delivered message', 'direct.us', 2);
  row('join: join frame to `joined`, ms', 'join.ms', 3);
  ratio(
    'broadcast CPU/msg, shared room ÷ one-user room',
    'shared.shared.broadcast.us',
    'shared.solo.broadcast.us',
    1.05,
  );
  ratio(
    'direct CPU/msg, shared room ÷ one-user room',
    'shared.shared.direct.us',
    'shared.solo.direct.us',
    1.05,
  );
  ratio(
    'join latency, shared room ÷ one-user room',
    'shared.shared.join.ms',
    'shared.solo.join.ms',
    1.1,
  );
}
