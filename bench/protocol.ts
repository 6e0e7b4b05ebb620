/** Messages between the bench orchestrator, the server processes and the load generator. */
import type { Histogram } from './histogram.ts';

export type ServerKind = 'relay' | 'ws' | 'sio';

export const serverNames: Record<ServerKind, string> = {
  relay: 'relay',
  ws: 'bare ws',
  sio: 'Socket.IO',
};

/** Shared secret of the benchmarked relay; the generator signs device tokens with it. */
export const benchSecret = 'bench-secret-0123456789abcdef';

/** Taken in one synchronous step inside the server process, so both cover the same instants. */
export interface Counters {
  /** Routed messages written to a live receiver (one per receiver). */
  delivered: number;
  /** utime + stime of the server process (all its threads) from /proc/self/stat, in seconds. */
  cpuSeconds: number;
  /** The same from `process.cpuUsage()` (µs resolution, for short windows), in seconds. */
  cpuUsageSeconds?: number;
}

/** A server under test, as started inside bench/server.ts. */
export interface BenchServer {
  port: number;
  /** Relay only: the buffer's SQLite file, read by the orchestrator to count commits. */
  dbPath?: string;
  /** Routed messages written to a live receiver so far, read synchronously. */
  delivered(): number;
  close(): Promise<void>;
}

export type ServerReport =
  | { kind: 'ready'; port: number; dbPath?: string }
  | ({ kind: 'counters' } & Counters)
  | ({ kind: 'memory'; newSpace: number } & NodeJS.MemoryUsage)
  | { kind: 'profiling' }
  | { kind: 'profiled' };

/** One room's devices as the shared-room case's host set them up (bench/team-host.ts). */
export interface DeviceGroup {
  name: string;
  room: string;
  /** Each device's id, its device token, and its room grant when it is a member's. */
  devices: Array<{ device: number; token: string; grant?: string }>;
}

export type TeamHostReport =
  | { kind: 'team-ready'; url: string; groups: DeviceGroup[] }
  | ({ kind: 'counters' } & Counters);

/** How a load generator talks to a server: our JSON frames (relay, bare ws) or Socket.IO. */
export type Dialect = 'frames' | 'sio';

export type LoadCommand =
  | { kind: 'connect'; dialect: Dialect; url: string; connections: number }
  /** Joins each group's devices as one room (the shared-room case). */
  | { kind: 'connect-groups'; url: string; groups: DeviceGroup[] }
  /** Each device of room `room` (an index in join order) leaves and joins again, `rounds` times. */
  | { kind: 'rejoin'; room: number; rounds: number }
  | {
      kind: 'throughput';
      /** Only the room of this index sends (all rooms when absent). */
      room?: number;
      mode: 'broadcast' | 'direct';
      window: number;
      warmupMs: number;
      /** Payload size in bytes; undefined: the ~80-byte edit of the compare section. */
      payloadBytes?: number;
    }
  | { kind: 'stop' }
  | { kind: 'latency'; ratePerSecond: number; warmupMs: number; measureMs: number }
  | { kind: 'buffer'; absentPerRoom: number; perSender: number }
  | { kind: 'release' };

export type LoadReport =
  | { kind: 'connected'; connections: number; seconds: number }
  | { kind: 'measuring' }
  | { kind: 'stopped'; received: number; seconds: number }
  | {
      kind: 'latency';
      samples: number;
      p50Ms: number;
      p99Ms: number;
      maxMs: number;
      /** Every sample of the window, bucketed, for the pooled percentiles of a run. */
      histogram: Histogram;
    }
  | { kind: 'released' }
  | { kind: 'sent'; messages: number }
  /** Milliseconds from each join frame sent to its `joined` received. */
  | { kind: 'rejoined'; joinMs: number[] };
