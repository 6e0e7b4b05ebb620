/**
 * The bench's child processes: servers (bench/server.ts) pinned to processor 0 and load
 * generators (bench/load.ts) pinned to processor 1 (taskset), so that neither steals the other's
 * core and the closed loop's batching does not change with the scheduler's mood.
 */
import { type ChildProcess, type SpawnOptions, spawn } from 'node:child_process';
import { join } from 'node:path';
import type { BenchOptions } from './options.ts';
import type { Counters, Dialect, LoadReport, ServerKind, ServerReport } from './protocol.ts';

const here = import.meta.dirname;
const tsx = ['--import', 'tsx'];

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A forked process with an inbox, so no report is missed between two awaits. */
export class Child<Report extends { kind: string }> {
  readonly proc: ChildProcess;
  readonly #inbox: Report[] = [];
  #waiters: Array<() => void> = [];
  #exited: Error | undefined;

  /**
   * `cpu`: the processor the child is pinned to (taskset), when pinning is on; `env`: variables
   * set for this child only.
   */
  constructor(
    file: string,
    args: string[],
    execArgv: string[],
    cpu?: number,
    env?: Record<string, string>,
  ) {
    const node = [...tsx, ...execArgv, join(here, file), ...args];
    const options: SpawnOptions = {
      stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
      env: { ...process.env, ...env },
    };
    this.proc =
      cpu === undefined
        ? spawn(process.execPath, node, options)
        : spawn('taskset', ['-c', String(cpu), process.execPath, ...node], options);
    this.proc.on('message', (report: Report) => {
      this.#inbox.push(report);
      this.#wake();
    });
    this.proc.on('exit', (code) => {
      this.#exited = new Error(`${file} ${args.join(' ')} exited with ${code}`);
      this.#wake();
    });
  }

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
  }

  send(message: object): void {
    this.proc.send(message);
  }

  async next<K extends Report['kind']>(kind: K): Promise<Extract<Report, { kind: K }>> {
    for (;;) {
      const at = this.#inbox.findIndex((r) => r.kind === kind);
      if (at >= 0) return this.#inbox.splice(at, 1)[0] as Extract<Report, { kind: K }>;
      if (this.#exited !== undefined) throw this.#exited;
      await new Promise<void>((resolve) => {
        this.#waiters.push(resolve);
      });
    }
  }

  async ask<K extends Report['kind']>(
    message: object,
    kind: K,
  ): Promise<Extract<Report, { kind: K }>> {
    this.send(message);
    return this.next(kind);
  }
}

export type ServerChild = Child<ServerReport>;
export type LoadChild = Child<LoadReport>;

export interface StartedServer {
  server: ServerChild;
  url: string;
  dbPath: string | undefined;
}

/** Starting and stopping the children of one run; all are killed when the run exits. */
export interface Processes {
  /** Processor of the servers (undefined: not pinned). */
  serverCpu: number | undefined;
  /** Processor of the load generators and HTTP load tools (undefined: not pinned). */
  loadCpu: number | undefined;
  /**
   * A fresh server process of `kind`, ready to accept connections; over TLS (wss://) when `tls`
   * is true, or when BENCH_TLS=1 and `tls` is not given.
   */
  startServer(kind: ServerKind, tls?: boolean): Promise<StartedServer>;
  stopServer(server: ServerChild): Promise<void>;
  /** The load generator of a server kind (one process per kind), started on first use. */
  load(kind: ServerKind): LoadChild;
  /** Any other forked child (the auth API server), killed with the rest. */
  fork<Report extends { kind: string }>(
    file: string,
    args: string[],
    execArgv: string[],
  ): Child<Report>;
  /** The kind a server process was started as. */
  kindOf(server: ServerChild): ServerKind | undefined;
  stopLoads(): void;
}

export const dialectOf = (kind: ServerKind): Dialect => (kind === 'sio' ? 'sio' : 'frames');

export function createProcesses(options: BenchOptions): Processes {
  const serverCpu = options.pin ? 0 : undefined;
  const loadCpu = options.pin ? 1 : undefined;
  const children: ChildProcess[] = [];
  process.on('exit', () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  });
  const kinds = new WeakMap<ServerChild, ServerKind>();
  const loads = new Map<ServerKind, LoadChild>();
  const fork = <Report extends { kind: string }>(
    file: string,
    args: string[],
    execArgv: string[],
    cpu = serverCpu,
  ) => {
    const child = new Child<Report>(file, args, execArgv, cpu);
    children.push(child.proc);
    return child;
  };
  return {
    serverCpu,
    loadCpu,
    async startServer(kind, tls = process.env.BENCH_TLS === '1') {
      const server = new Child<ServerReport>(
        'server.ts',
        [kind],
        ['--expose-gc', ...(process.env.BENCH_NODE_FLAGS?.split(' ') ?? [])],
        serverCpu,
        { BENCH_TLS: tls ? '1' : '0' },
      );
      children.push(server.proc);
      kinds.set(server, kind);
      const { port, dbPath } = await server.next('ready');
      const scheme = tls ? 'wss' : 'ws';
      const url = kind === 'sio' ? `http://127.0.0.1:${port}` : `${scheme}://127.0.0.1:${port}/`;
      return { server, url, dbPath };
    },
    async stopServer(server) {
      const exited = new Promise((resolve) => server.proc.once('exit', resolve));
      server.send({ kind: 'close' });
      await Promise.race([exited, sleep(5_000)]);
      if (server.proc.exitCode === null) server.proc.kill('SIGKILL');
    },
    load(kind) {
      let child = loads.get(kind);
      if (child === undefined) {
        child = fork<LoadReport>('load.ts', [], [], loadCpu);
        loads.set(kind, child);
      }
      return child;
    },
    fork: (file, args, execArgv) => fork(file, args, execArgv),
    kindOf: (server) => kinds.get(server),
    stopLoads() {
      for (const child of loads.values()) child.proc.kill();
    },
  };
}

/** The server's counters, read in one synchronous step inside it. */
export function counters(server: ServerChild): Promise<Counters> {
  return server.ask({ kind: 'counters' }, 'counters');
}
