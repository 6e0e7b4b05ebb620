/**
 * The bench's command line, read once with node:util `parseArgs`:
 *   --quick            the shorter plan (2 rounds, 4 windows, scale at 100/1,000/10,000)
 *   --only=a,b         run only these sections (compare, memory, buffer, auth, scale, payloads,
 *                      tls: connection set-up with TLS against without; shared: a room
 *                      shared by 3 users against one user's room of as many devices)
 *   --kinds=relay,ws   compare a subset of the servers (relay, ws, sio)
 *   --rounds=N         interleaved rounds
 *   --windows=N        measured windows per server and mode in a round
 *   --scale=100,10000  connection counts of the scale curve
 *   --no-pin           let the kernel place servers and generators (no taskset)
 * A mistake is one line on stderr and exit code 2.
 */
import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';
import type { ServerKind } from './protocol.ts';

export const sectionNames = [
  'compare',
  'memory',
  'buffer',
  'auth',
  'scale',
  'payloads',
  'tls',
  'shared',
] as const;
export type SectionName = (typeof sectionNames)[number];

const serverKinds: readonly ServerKind[] = ['relay', 'ws', 'sio'];

/** Durations and counts of one run. */
export interface Plan {
  /** Interleaved rounds of every section. */
  rounds: number;
  /** Measured windows per server and mode in a compare round (plus one warm-up window). */
  windows: number;
  /** Load before each measured throughput window, ms. */
  warmupMs: number;
  /** One throughput window, ms. */
  measureMs: number;
  /** One latency window, ms. */
  latencyMs: number;
  /** Idle connections added for the memory slope. */
  idle: number;
  /** Connection counts of the scale curve. */
  scale: number[];
  /** Length of one auth API measurement, s. */
  authSeconds: number;
  /** Interleaved rounds of the auth API section. */
  authRounds: number;
}

export interface BenchOptions {
  quick: boolean;
  /** Sections asked for with --only; undefined: all (the full run). */
  only: SectionName[] | undefined;
  kinds: ServerKind[];
  plan: Plan;
  /** Servers pinned to processor 0, generators to processor 1. */
  pin: boolean;
}

const quickPlan: Plan = {
  rounds: 2,
  windows: 4,
  warmupMs: 300,
  measureMs: 1_000,
  latencyMs: 1_500,
  idle: 5_000,
  scale: [100, 1_000, 10_000],
  authSeconds: 2,
  authRounds: 2,
};

const fullPlan: Plan = {
  rounds: 3,
  windows: 6,
  warmupMs: 300,
  measureMs: 1_500,
  latencyMs: 2_000,
  idle: 8_000,
  scale: [100, 1_000, 3_000, 10_000],
  authSeconds: 2,
  authRounds: 8,
};

class UsageError extends Error {}

function positiveInt(flag: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0)
    throw new UsageError(`--${flag}: expected a positive integer, got "${value}"`);
  return n;
}

function listOf<T extends string>(flag: string, value: string, allowed: readonly T[]): T[] {
  const items = value.split(',').filter((item) => item !== '');
  for (const item of items) {
    if (!allowed.includes(item as T)) {
      throw new UsageError(`--${flag}: unknown "${item}" (one of ${allowed.join(', ')})`);
    }
  }
  return items as T[];
}

/** Parses `argv` (without node and the script); throws a one-line message on a mistake. */
export function parseBenchArgs(argv: string[]): BenchOptions {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      quick: { type: 'boolean', default: false },
      only: { type: 'string' },
      kinds: { type: 'string' },
      rounds: { type: 'string' },
      windows: { type: 'string' },
      scale: { type: 'string' },
      'no-pin': { type: 'boolean', default: false },
    },
  });
  const plan = { ...(values.quick ? quickPlan : fullPlan) };
  if (values.rounds !== undefined) plan.rounds = positiveInt('rounds', values.rounds);
  if (values.windows !== undefined) plan.windows = positiveInt('windows', values.windows);
  if (values.scale !== undefined) {
    plan.scale = values.scale.split(',').map((count) => positiveInt('scale', count));
  }
  return {
    quick: values.quick,
    only: values.only === undefined ? undefined : listOf('only', values.only, sectionNames),
    kinds:
      values.kinds === undefined ? [...serverKinds] : listOf('kinds', values.kinds, serverKinds),
    plan,
    pin: !values['no-pin'] && availableParallelism() >= 2,
  };
}

/** The options of this run; a mistake on the command line exits 2 with one line. */
export function benchOptions(): BenchOptions {
  try {
    return parseBenchArgs(process.argv.slice(2));
  } catch (err: unknown) {
    if (!(err instanceof UsageError) && !(err instanceof TypeError)) throw err;
    process.stderr.write(`bench: ${err.message}\n`);
    process.exit(2);
  }
}

/** Whether a section runs: all of them without --only. */
export function runs(options: BenchOptions, section: SectionName): boolean {
  return options.only === undefined || options.only.includes(section);
}
