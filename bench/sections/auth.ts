/** The auth API against a bare express route, on SQLite and PostgreSQL (wrk or autocannon). */
import { spawn, spawnSync } from 'node:child_process';
import autocannon from 'autocannon';
import type { AuthServerReport } from '../auth-server.ts';
import type { BenchOptions } from '../options.ts';
import { type Processes, sleep } from '../processes.ts';
import { has, med, print, ratio, record, spread } from '../stats.ts';

const drivers = ['sqlite', 'postgres'] as const;
type Driver = (typeof drivers)[number];

/**
 * The HTTP load tool: wrk (C, one thread, on the generators' processor) when installed, so the
 * server and not the client is the limit; else autocannon, in this process.
 */
const wrk = spawnSync('wrk', ['--version'], { stdio: 'ignore' }).error === undefined;
const httpTool = wrk ? 'wrk' : 'autocannon';
const connections = 16;

async function cannonWrk(
  url: string,
  token: string | undefined,
  seconds: number,
  loadCpu: number | undefined,
): Promise<number> {
  const args = ['-t1', `-c${connections}`, `-d${seconds}s`, '--latency'];
  if (token !== undefined) args.push('-H', `Authorization: Bearer ${token}`);
  const command = loadCpu === undefined ? ['wrk'] : ['taskset', '-c', String(loadCpu), 'wrk'];
  const child = spawn(command[0] as string, [...command.slice(1), ...args, url]);
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
  });
  await new Promise((resolve) => child.once('exit', resolve));
  const failures = /Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)/.exec(out);
  if (failures !== null) throw new Error(`${url}: ${failures[0]}`);
  const rate = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
  if (!Number.isFinite(rate)) throw new Error(`${url}: wrk printed no rate:\n${out}`);
  return rate;
}

async function cannon(
  url: string,
  token: string | undefined,
  seconds: number,
  loadCpu: number | undefined,
): Promise<number> {
  if (wrk) return cannonWrk(url, token, seconds, loadCpu);
  const result = await autocannon({
    url,
    connections,
    duration: seconds,
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
  });
  if (result.non2xx > 0 || result.errors > 0) {
    throw new Error(`${url}: ${result.non2xx} non-2xx answers, ${result.errors} errors`);
  }
  return result.requests.average;
}

/** One driver: the auth server process, then interleaved rounds; the reason when skipped. */
async function authBench(
  options: BenchOptions,
  procs: Processes,
  driver: Driver,
): Promise<string | undefined> {
  const { plan } = options;
  const child = procs.fork<AuthServerReport>(
    'auth-server.ts',
    [driver],
    process.env.BENCH_AUTH_FLAGS?.split(' ') ?? [],
  );
  const first = await Promise.race([child.next('ready'), child.next('skipped')]);
  if (first.kind === 'skipped') return first.reason;
  const ready = first;
  const run = (url: string, token: string | undefined, seconds: number) =>
    cannon(url, token, seconds, procs.loadCpu);
  // warm both up (JIT, connection pool)
  await run(`${ready.bareUrl}/constant`, undefined, 1);
  await run(`${ready.authUrl}/auth/device`, ready.token, 1);
  for (let round = 0; round < plan.authRounds; round++) {
    record(
      `auth.${driver}.bare`,
      await run(`${ready.bareUrl}/constant`, undefined, plan.authSeconds),
    );
    record(
      `auth.${driver}.device`,
      await run(`${ready.authUrl}/auth/device`, ready.token, plan.authSeconds),
    );
    record(
      `auth.${driver}.devices`,
      await run(`${ready.authUrl}/auth/devices`, ready.token, plan.authSeconds),
    );
  }
  const exited = new Promise((resolve) => child.proc.once('exit', resolve));
  child.send({ kind: 'stop' });
  await Promise.race([exited, sleep(5_000)]);
  return undefined;
}

const skipped: string[] = [];

export async function runAuth(options: BenchOptions, procs: Processes): Promise<void> {
  // autocannon runs in this process: on the generators' processor, the servers keep theirs
  if (procs.loadCpu !== undefined) {
    spawnSync('taskset', ['-a', '-p', '-c', String(procs.loadCpu), String(process.pid)], {
      stdio: 'ignore',
    });
  }
  for (const driver of drivers) {
    process.stderr.write(`auth API on ${driver}\n`);
    const reason = await authBench(options, procs, driver);
    if (reason !== undefined) skipped.push(`${driver}: skipped (${reason})`);
  }
}

export function reportAuth(): void {
  print();
  print(
    `| auth API, requests/s (${httpTool}, ${connections} connections) | bare express | GET /auth/device | GET /auth/devices |`,
  );
  print('|---|---|---|---|');
  for (const driver of drivers) {
    if (!has(`auth.${driver}.bare`)) continue;
    print(
      `| ${driver} | ${['bare', 'device', 'devices']
        .map(
          (k) => `${Math.round(med(`auth.${driver}.${k}`))} (${spread(`auth.${driver}.${k}`, 0)})`,
        )
        .join(' | ')} |`,
    );
    for (const route of ['device', 'devices']) {
      ratio(
        `auth ${driver}: /auth/${route} ÷ bare express`,
        `auth.${driver}.${route}`,
        `auth.${driver}.bare`,
        0.8,
        false,
      );
    }
  }
  for (const line of skipped) print(line);
}
