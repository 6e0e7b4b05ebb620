import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../log.ts';
import type { ClusterCounters } from './cluster-metrics.ts';
import type { Handover } from './handover.ts';
import type { Publications } from './publications.ts';
import type { RecordSeal } from './record-seal.ts';
import type { RoomRoster, RosterEntry } from './roster.ts';

/** What a room's line shares with the rest of its node's broker. */
export interface RoomLineContext {
  /** This node's name, and its UTF-8 bytes (as records in the streams carry it). */
  readonly node: string;
  readonly nodeBytes: Buffer;
  readonly logger: Logger;
  readonly now: () => number;
  /** `buffer.seconds` in ms: the retention of the room's stream. */
  readonly bufferWindowMs: number;
  /** Replicas of the room's stream. */
  readonly replicas: number;
  /** The connection to NATS, undefined before the first connect. */
  connection(): NatsConnection | undefined;
  /** The JetStream handles, undefined while not connected. */
  js(): JetStreamClient | undefined;
  jsm(): JetStreamManager | undefined;
  readonly handover: Handover;
  /** The cluster's roster of a room (this node's copy). */
  rosterOf(hash: string): RoomRoster;
  /** Applies a roster entry here at once (revision 0), before NATS answered its write. */
  applyEntry(hash: string, device: string, entry: RosterEntry, revision: number): void;
  /** Writes a roster entry to NATS, and applies it. */
  write(hash: string, device: string, entry: RosterEntry): Promise<number>;
  readonly counters: ClusterCounters;
  /** This node's publications (every line's count on its counter). */
  readonly publications: Publications;
  /** Seals what the node publishes and checks what it reads (record-seal.ts). */
  readonly seal: RecordSeal;
  /** The line is no longer held (its broker forgets it). */
  released(hash: string): void;
}
