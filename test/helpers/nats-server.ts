import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { freePort } from './ports.ts';

/**
 * Why the cluster suites cannot run here: no `nats-server` on the PATH. Undefined when it is
 * there. With REQUIRE_NATS=1 (set by CI) a missing server is a failure instead of a skip.
 */
export function natsSkipReason(): string | undefined {
  const probe = spawnSync('nats-server', ['--version'], { encoding: 'utf8' });
  if (probe.status === 0) return undefined;
  const why = `nats-server not found on the PATH (${probe.error?.message ?? probe.stderr.trim()}); install Debian's nats-server`;
  if (process.env.REQUIRE_NATS === '1') throw new Error(`REQUIRE_NATS=1 but ${why}`);
  return why;
}

/** One `nats-server -js` process of a test, on a free loopback port with its own store folder. */
export interface NatsServer {
  /** Its server name in a cluster (`n0`, `n1`...: JetStream's `cluster.leader` names it). */
  readonly name: string | undefined;
  /** `nats://127.0.0.1:<port>`. */
  readonly url: string;
  readonly port: number;
  /** The process id of the running server; undefined while stopped. */
  readonly pid: number | undefined;
  /** Starts it again on the same port and store folder (after stop or kill). */
  start(): Promise<void>;
  /** SIGTERM, then waits for the exit. */
  stop(): Promise<void>;
  /** SIGKILL, then waits for the exit. */
  kill(): Promise<void>;
  /** Stops it and removes its store folder. */
  dispose(): Promise<void>;
}

interface ServerPlan {
  name?: string;
  port: number;
  dir: string;
  /** Cluster arguments (name, route port, routes); none for a single server. */
  clusterArgs: string[];
  /** A configuration file (`-c`): authorization, TLS. */
  config?: string;
  /** Run with `-c config` alone: the file sets the address, port and JetStream itself. */
  configOnly?: boolean;
}

const readyDeadlineMs = 10_000;

function startProcess(plan: ServerPlan): Promise<ChildProcess> {
  const args = ['-js', '-sd', plan.dir, '-a', '127.0.0.1', '-p', String(plan.port)];
  const config = plan.config === undefined ? [] : ['-c', plan.config];
  const all = plan.configOnly ? config : [...config, ...args, ...plan.clusterArgs];
  const child = spawn('nats-server', all, {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  /** The end of what it wrote, for the ready line (the kept log stops at 20,000 characters). */
  let recent = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(`nats-server on ${plan.port} not ready within ${readyDeadlineMs} ms: ${log}`),
      );
    }, readyDeadlineMs);
    child.stderr?.on('data', (chunk: Buffer) => {
      const text = chunk.toString();
      if (log.length < 20_000) log += text;
      // a server started again lists every stream it restores before it is ready: past 20,000
      // characters with about 80 streams
      const seen = recent + text;
      recent = seen.slice(-200);
      if (seen.includes('Server is ready')) {
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`nats-server on ${plan.port} exited with ${code}: ${log}`));
    });
  });
}

async function signalAndWait(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill(signal);
  await exited;
}

function serverOf(plan: ServerPlan): NatsServer {
  let child: ChildProcess | undefined;
  const end = async (signal: NodeJS.Signals) => {
    if (child === undefined) return;
    const running = child;
    child = undefined;
    await signalAndWait(running, signal);
  };
  return {
    name: plan.name,
    url: `nats://127.0.0.1:${plan.port}`,
    port: plan.port,
    get pid() {
      return child?.pid;
    },
    async start() {
      if (child === undefined) child = await startProcess(plan);
    },
    stop: () => end('SIGTERM'),
    kill: () => end('SIGKILL'),
    async dispose() {
      await end('SIGTERM');
      rmSync(plan.dir, { recursive: true, force: true });
    },
  };
}

/**
 * Starts one JetStream-enabled nats-server on a free loopback port, with the configuration file
 * `config` (authorization, TLS) when given.
 */
export async function startNatsServer(config?: string): Promise<NatsServer> {
  const dir = mkdtempSync(join(tmpdir(), 'sync-host-nats-'));
  const plan: ServerPlan = { port: await freePort(), dir, clusterArgs: [] };
  if (config !== undefined) plan.config = config;
  const server = serverOf(plan);
  await server.start();
  return server;
}

/**
 * Starts `nats-server -c config` and nothing else, as an operator would: the file must listen on
 * 127.0.0.1:`port` (a {@link freePort}) and enable JetStream with a store folder of its own.
 */
export async function startConfiguredNatsServer(config: string, port: number): Promise<NatsServer> {
  const dir = mkdtempSync(join(tmpdir(), 'sync-host-nats-'));
  const server = serverOf({ port, dir, clusterArgs: [], config, configOnly: true });
  await server.start();
  return server;
}

/** Polls until JetStream answers on `url` (a cluster must elect its meta leader first). */
export async function waitForJetStream(url: string, deadlineMs = 20_000): Promise<void> {
  const until = Date.now() + deadlineMs;
  let last: unknown;
  while (Date.now() < until) {
    try {
      const nc = await connect({ servers: url, timeout: 1_000 });
      try {
        await (await jetstreamManager(nc, { timeout: 1_000 })).getAccountInfo();
        return;
      } finally {
        await nc.close();
      }
    } catch (err: unknown) {
      last = err;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  throw new Error(`JetStream not ready on ${url} within ${deadlineMs} ms: ${String(last)}`);
}

/** Three (or `size`) nats-servers routed to each other as one JetStream cluster. */
export interface NatsCluster {
  readonly servers: NatsServer[];
  /** Every client URL, comma-separated (the form of `cluster.nats`). */
  readonly urls: string;
  dispose(): Promise<void>;
}

/** Starts a JetStream cluster of `size` servers on loopback and waits until JetStream answers. */
export async function startNatsCluster(size = 3): Promise<NatsCluster> {
  const ports: number[] = [];
  const routePorts: number[] = [];
  for (let i = 0; i < size; i++) {
    ports.push(await freePort());
    routePorts.push(await freePort());
  }
  const routes = routePorts.map((port) => `nats://127.0.0.1:${port}`).join(',');
  const servers = ports.map((port, i) =>
    serverOf({
      name: `n${i}`,
      port,
      dir: mkdtempSync(join(tmpdir(), `sync-host-nats-${i}-`)),
      clusterArgs: [
        '-n',
        `n${i}`,
        '--cluster_name',
        'sync-host-test',
        '--cluster',
        `nats://127.0.0.1:${routePorts[i]}`,
        '--routes',
        routes,
      ],
    }),
  );
  const cluster: NatsCluster = {
    servers,
    urls: servers.map((server) => server.url).join(','),
    async dispose() {
      await Promise.all(servers.map((server) => server.dispose()));
    },
  };
  try {
    await Promise.all(servers.map((server) => server.start()));
    await waitForJetStream(cluster.urls);
  } catch (err: unknown) {
    await cluster.dispose();
    throw err;
  }
  return cluster;
}
