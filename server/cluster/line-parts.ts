import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../log.ts';
import type { ClusterCounters } from './cluster-metrics.ts';
import type { Handover } from './handover.ts';
import type { Publications } from './publications.ts';
import type { RecordSeal } from './record-seal.ts';
import type { RoomRoster, RosterEntry } from './roster.ts';

/** This node as its room lines see it: fixed for the node's life. */
export interface LineNode {
  /** This node's name, and its UTF-8 bytes (as records in the streams carry it). */
  readonly name: string;
  readonly nameBytes: Buffer;
  readonly logger: Logger;
  /** NATS's clock (cluster-clock.ts): what nodes compare. */
  readonly now: () => number;
  /** `buffer.seconds` in ms: the retention of a room's stream. */
  readonly bufferWindowMs: number;
  /** Replicas of a room's stream. */
  readonly replicas: number;
  /** Seals what the node publishes and checks what it reads (record-seal.ts). */
  readonly seal: RecordSeal;
}

/** The node's NATS handles, each undefined while not connected. */
export interface NatsHandles {
  connection(): NatsConnection | undefined;
  js(): JetStreamClient | undefined;
  jsm(): JetStreamManager | undefined;
}

/** One room's part of the roster: this node's copy of it and this node's writes to it. */
export interface RoomRosterAccess {
  readonly roster: RoomRoster;
  /** Applies an entry here at once (revision 0), before NATS answered its write. */
  apply(device: string, entry: RosterEntry): void;
  /** Writes an entry to NATS, and applies it. */
  write(device: string, entry: RosterEntry): Promise<number>;
  /** Reads a device's entry from NATS itself (not this node's copy), and applies it. */
  read(device: string): Promise<void>;
}

/** What one room's line is given by its node's broker; every part is the room's or read-only. */
export interface RoomLineParts {
  readonly node: LineNode;
  readonly nats: NatsHandles;
  readonly roster: RoomRosterAccess;
  /** This node's publications (every line's count on its counter). */
  readonly publications: Publications;
  readonly counters: ClusterCounters;
  /** Positions recorded in NATS and releases asked of other nodes (handover.ts). */
  readonly handover: Handover;
  /**
   * Per device, what a refused join of the room here left to write back in the roster, until it
   * is written or a newer join of the device here takes it as where the device stands. Kept by
   * the broker, also while no line holds the room (its release answers use it).
   */
  readonly undone: Map<string, RosterEntry>;
  /** The line is no longer held (its broker forgets it). */
  released(): void;
}
