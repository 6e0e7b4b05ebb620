import { setTimeout as pause } from 'node:timers/promises';
import { type DeviceId, deviceKey } from '../../protocol/relay-frames.ts';
import type { ProjectRole } from '../../protocol/room-grant.ts';
import type { DepartureReason, RoomLine, RoomListener, UnsentFrame } from '../relay/broker.ts';
import { droppedOn, type JoinAttempt, registerJoin, undoJoin } from './join-replay.ts';
import { joiningBesides, type LocalDevice, queueForJoining } from './joining-devices.ts';
import type { RoomLineParts } from './line-parts.ts';
import { ensureStream, followStream, streamOf } from './room-stream.ts';
import type { RoomRoster, RosterChange, RosterEntry } from './roster.ts';
import { encodeRecord, relaySender, type StreamFrame, senderOf } from './stream-record.ts';

/** Tries to open a room's stream (about 30 s in all) before its joins fail. */
const openAttempts = 20;
/**
 * A join not registered within this time is refused (1013), below the client library's join
 * timeout (10 s): JetStream does not answer (NATS just lost, or a NATS cluster electing leaders).
 */
const joinDeadlineMs = 8_000;

/**
 * One room held by this node: its devices here, its place in the room's stream (followed in
 * order; frames for its devices delivered, the rest skipped), the joins with their replay, and
 * the publication of what its devices send to devices elsewhere or absent.
 */
export class ClusterRoomLine implements RoomLine {
  readonly local = new Map<string, LocalDevice>();
  /** The last stream sequence this node took from the room's stream. */
  cursor = 0;
  /** The last `cursor` recorded in NATS. */
  #recorded = 0;
  readonly ready: Promise<void>;
  /** The subject of the room's stream. */
  readonly #subject: string;
  /** Publications made before the stream was open, sent in order once it is; then undefined. */
  #waiting: Array<() => void> | undefined = [];
  /** Why the stream could not be opened: every publication fails. */
  #broken: unknown;
  #stop: (() => void) | undefined;
  #released = false;
  /** The host the room was last told of. */
  #toldHost: string | undefined;

  readonly #parts: RoomLineParts;

  constructor(
    parts: RoomLineParts,
    readonly roomId: string,
    readonly hash: string,
    readonly listener: RoomListener,
  ) {
    this.#parts = parts;
    this.#subject = streamOf(roomId).subject;
    this.#tell();
    this.ready = this.#start();
    this.ready.then(
      () => this.#opened(),
      (err: unknown) => {
        parts.node.logger.error(
          { err: String(err), room: roomId },
          'cluster: cannot open the room stream',
        );
        this.#broken = err;
        this.#opened();
      },
    );
  }

  /** The stream is open (or cannot be): the publications made meanwhile go, in order. */
  #opened(): void {
    const waiting = this.#waiting ?? [];
    this.#waiting = undefined;
    for (const send of waiting) send();
  }

  /** Opens the room's stream, again until it works (JetStream may not be ready yet). */
  async #start(): Promise<void> {
    const { node, nats } = this.#parts;
    for (let attempt = 0; ; attempt++) {
      try {
        const jsm = nats.jsm();
        if (jsm === undefined) throw new Error('not connected to NATS');
        const bounds = await ensureStream(jsm, this.roomId, node.bufferWindowMs, node.replicas);
        this.cursor = bounds.last;
        break;
      } catch (err: unknown) {
        if (this.#released || attempt >= openAttempts) throw err;
        await pause(250 * Math.min(attempt + 1, 8));
      }
    }
    const js = nats.js();
    if (this.#released || js === undefined) return;
    this.#stop = followStream(js, this.roomId, this.cursor + 1, node.nameBytes, {
      seal: node.seal,
      frame: (f) => this.#take(f),
      own: (seq) => {
        if (seq > this.cursor) this.cursor = seq;
      },
      error: (err) => {
        node.logger.warn(
          { err: String(err), room: this.roomId },
          'cluster: following the room again',
        );
      },
    });
  }

  recordPosition(): void {
    const cursor = this.cursor;
    if (this.local.size === 0 || cursor <= this.#recorded) return;
    this.#parts.handover
      .record(this.hash, cursor)
      .then(() => {
        if (cursor > this.#recorded) this.#recorded = cursor;
      })
      .catch(() => {});
  }

  get #roster(): RoomRoster {
    return this.#parts.roster.roster;
  }

  /** Tells the room who is present now (on `open`); `rosterChanged` tells it what changes. */
  #tell(): void {
    for (const [, stored] of this.#roster.present()) {
      this.listener.joined(stored.entry.id, stored.entry.role);
    }
    this.#hostHeard(false);
  }

  /**
   * The room hears of a new host: `announced` when the host left; otherwise (the first device,
   * or a join order NATS settled differently from this node's first guess) it only notes it.
   */
  #hostHeard(announced: boolean): void {
    const key = this.#roster.hostKey();
    if (key === this.#toldHost) return;
    this.#toldHost = key;
    const id = key === undefined ? undefined : this.#roster.devices.get(key)?.entry.id;
    if (id !== undefined) this.listener.hostChanged(id, announced);
  }

  join(device: DeviceId, ticket: number, access: ProjectRole = 'owner'): void {
    const key = deviceKey(device);
    const role = access === 'owner' ? undefined : access;
    const ownFrom = this.#parts.publications.count;
    const older = this.local.get(key);
    // an older connection here that this join replaces had the stream handed to it up to here
    const replacing =
      older === undefined || older.pending ? undefined : Math.max(this.cursor, older.upto);
    const local: LocalDevice = { pending: true, queue: [], upto: 0, ownFrom };
    this.local.set(key, local);
    const attempt: JoinAttempt = { abandoned: false, undo: undefined };
    // a refused join of this device here that did not write back its roster entry yet
    const undone = this.#parts.undone.get(key);
    this.#parts.undone.delete(key);
    const give = (why: unknown): void => {
      if (attempt.abandoned) return;
      attempt.abandoned = true;
      if (attempt.undo !== undefined) this.#parts.undone.set(key, attempt.undo);
      if (this.local.get(key) === local) this.local.delete(key);
      this.#parts.node.logger.warn(
        { err: String(why), room: this.roomId, device: key },
        'cluster: join not registered, refused (1013)',
      );
      this.listener.refused(ticket);
    };
    const deadline = setTimeout(() => give('no answer from JetStream in time'), joinDeadlineMs);
    const place = { roomId: this.roomId, hash: this.hash, cursor: () => this.cursor };
    const joining = { key, device, local, attempt, role, undone, replacing };
    registerJoin(this.#parts, place, this.ready, joining)
      .then(({ frames, gap }) => {
        if (attempt.abandoned) return;
        const devices = this.#roster.present().map(([, stored]) => stored.entry.id);
        const hostKey = this.#roster.hostKey() ?? key;
        const roles = this.#roster.roles();
        this.listener.admitted(ticket, { devices, roles, hostKey, frames, gap });
        this.#parts.counters.replayed += frames.length;
        local.pending = false;
        for (const f of local.queue) {
          if (f.seq > local.upto) this.listener.deliver(f.frame, key, f.seq);
        }
        local.queue = [];
      })
      .catch(give)
      .finally(() => {
        clearTimeout(deadline);
        local.queue = [];
        if (attempt.abandoned) {
          // what it wrote after it was given up is in its undo by now (taken by a newer join of
          // the device here, that one carries it)
          if (this.#parts.undone.has(key) && attempt.undo !== undefined) {
            this.#parts.undone.set(key, attempt.undo);
          }
          const stillAway = () => !this.local.has(key);
          const undo = attempt.undo;
          void undoJoin(this.#parts.node, this.#parts.roster, key, undo, stillAway).then(() => {
            if (this.#parts.undone.get(key) === undo && stillAway()) this.#parts.undone.delete(key);
          });
        }
      });
  }

  /**
   * An entry changed the room's roster (written here or on another node): a device of this node
   * joined elsewhere is replaced here (4009); one marked absent by another node while this node
   * was cut off from NATS, and still here, is written present again; the room hears who joined,
   * left and became host.
   */
  rosterChanged(device: string, entry: RosterEntry, change: RosterChange): void {
    const { node, roster } = this.#parts;
    const { listener } = this;
    const movedAway = change.moved?.from === node.name && entry.node !== node.name;
    if (movedAway && this.local.has(device)) {
      this.local.delete(device);
      for (const { frame } of listener.replaced(device)) this.sendTo(device, frame);
    }
    const mine = this.local.get(device);
    if (
      entry.state === 'absent' &&
      entry.node === node.name &&
      mine !== undefined &&
      !mine.pending
    ) {
      void roster
        .write(device, { ...entry, state: 'present', order: 0, cursor: 0 })
        .catch(() => {});
    }
    if (change.joined !== undefined) listener.joined(change.joined, change.joinedRole);
    if (change.left !== undefined) listener.left(change.left.id, change.left.reason);
    this.#hostHeard(change.newHost !== undefined);
  }

  /**
   * Another node takes the device over: its connection here is closed (4009). Returns up to where
   * it had the room's stream (before the first frame of the stream its connection had queued and
   * not written: the new node replays from there) and this node's publications it had; undefined
   * when it is neither held here nor was dropped here.
   */
  handOver(device: string, nodeSeq: number): { cursor: number; nodeSeq: number } | undefined {
    const local = this.local.get(device);
    if (local === undefined || local.pending) return this.#droppedHere(device);
    this.local.delete(device);
    const unsent = this.listener.replaced(device);
    return { cursor: this.#resumeAt(device, Math.max(this.cursor, local.upto), unsent), nodeSeq };
  }

  /** A device whose connection here dropped: where it had reached (see {@link droppedOn}). */
  #droppedHere(device: string): { cursor: number; nodeSeq: number } | undefined {
    // a refused join here may have written the device present here, and not yet written back
    const entry = this.#parts.undone.get(device) ?? this.#roster.devices.get(device)?.entry;
    return droppedOn(this.#parts.node.name, entry);
  }

  /**
   * Where the replay of a device that leaves this node with `unsent` frames starts: before the
   * first of them that came from the room's stream (published again, it would come after newer
   * frames), at `cursor` if none did. The others are published for it, in order.
   */
  #resumeAt(device: string, cursor: number, unsent: readonly UnsentFrame[]): number {
    let resume = cursor;
    const others: Buffer[] = [];
    for (const { frame, position } of unsent) {
      if (position === undefined) others.push(frame);
      else if (position - 1 < resume) resume = position - 1;
    }
    for (const frame of others) this.sendTo(device, frame);
    return resume;
  }

  depart(device: string, reason: DepartureReason, unsent: readonly UnsentFrame[]): void {
    const stored = this.#roster.devices.get(device);
    this.local.delete(device);
    if (stored === undefined || stored.entry.state !== 'present') {
      for (const { frame } of unsent) this.sendTo(device, frame);
      return;
    }
    const entry: RosterEntry =
      reason === 'disconnect'
        ? {
            ...stored.entry,
            state: 'absent',
            order: stored.order,
            cursor: this.cursor,
            nodeSeq: this.#parts.publications.count,
            droppedAt: this.#parts.node.now(),
          }
        : { ...stored.entry, state: 'left', reason, order: stored.order };
    // heard here at once, and by the other nodes through the roster
    this.#parts.roster.apply(device, entry);
    if (entry.state === 'absent') entry.cursor = this.#resumeAt(device, entry.cursor, unsent);
    else for (const { frame } of unsent) this.sendTo(device, frame);
    this.#record(device, entry);
  }

  #record(device: string, entry: RosterEntry): void {
    this.#parts.roster.write(device, entry).catch((err: unknown) => {
      this.#parts.node.logger.warn({ err: String(err), device }, 'cluster: departure not recorded');
    });
  }

  /** Whether a device elsewhere or kept for can receive; true also for a broadcast's `*`. */
  #reaches(stored: { entry: RosterEntry } | undefined, at: number): boolean {
    if (stored === undefined) return false;
    const { entry } = stored;
    if (entry.state === 'present') return true;
    return entry.state === 'absent' && at < entry.droppedAt + this.#parts.node.bufferWindowMs;
  }

  sendTo(device: string, frame: Buffer): boolean {
    if (!this.#reaches(this.#roster.devices.get(device), this.#parts.node.now())) return false;
    this.#publish(device, frame);
    return true;
  }

  /**
   * A broadcast always goes through the room's stream, also when this node's roster shows every
   * device here: that roster follows NATS and lags behind it (by moments, by seconds across a
   * NATS failover), so a device that joined on another node, or dropped there and is kept for,
   * may not be in it yet; a broadcast kept from the stream then would be lost for it with no
   * gap said. The devices here get it directly; a replay skips what its old node delivered so.
   */
  broadcast(frame: Buffer): void {
    this.#publish('*', frame);
  }

  notice(frame: Buffer): void {
    for (const [device, stored] of this.#roster.devices) {
      if (stored.entry.state === 'present' && !this.local.has(device)) {
        this.#publish('*', frame, relaySender);
        return;
      }
    }
    // a device joining here is not a member yet: it gets the notice through the stream
    if (joiningBesides(this.local, relaySender)) this.#publish('*', frame, relaySender);
  }

  /**
   * Publishes a frame to the room's stream without waiting for NATS's answer (the node's
   * publications track it); in order after the ones made before the stream was open. A failed
   * publication is held against its sender's next `ping`; a notice's against nobody.
   */
  #publish(to: string, frame: Buffer, from = senderOf(frame)): void {
    const { node, publications } = this.#parts;
    const n = publications.begin(this.roomId, from === relaySender ? undefined : from);
    // after every frame of the stream its replay covers, whatever its sequence turns out to be
    if (this.local.size > 0 && (to === '*' || this.local.has(to))) {
      const seq = Number.POSITIVE_INFINITY;
      queueForJoining(this.local, { seq, to, from, node: node.name, nodeSeq: n, frame });
    }
    if (this.#waiting === undefined) this.#send(n, to, from, frame);
    else this.#waiting.push(() => this.#send(n, to, from, frame));
  }

  #send(n: number, to: string, from: string, frame: Buffer): void {
    const { node, nats, publications } = this.#parts;
    const nc = nats.connection();
    if (this.#broken !== undefined || nc === undefined) {
      publications.fail(n, this.#broken ?? new Error('not connected to NATS'));
      return;
    }
    const { payload, headers } = encodeRecord(
      { to, from, node: node.name, nodeSeq: n, frame },
      { seal: node.seal, subject: this.#subject },
    );
    publications.send(nc, n, this.#subject, payload, headers);
  }

  #take(f: StreamFrame): void {
    if (f.seq > this.cursor) this.cursor = f.seq;
    if (f.node === this.#parts.node.name) return;
    this.#parts.counters.received++;
    if (f.to !== '*') {
      this.#to(f.to, f);
      return;
    }
    for (const device of this.local.keys()) if (device !== f.from) this.#to(device, f);
  }

  #to(device: string, f: StreamFrame): void {
    const local = this.local.get(device);
    if (local === undefined) return;
    if (local.pending) local.queue.push(f);
    else if (f.seq > local.upto) this.listener.deliver(f.frame, device, f.seq);
  }

  dropAll(unsent: ReadonlyMap<string, readonly UnsentFrame[]>): void {
    for (const device of [...this.local.keys()]) {
      this.depart(device, 'disconnect', unsent.get(device) ?? []);
    }
  }

  release(): void {
    this.#released = true;
    this.#stop?.();
    this.#parts.released();
  }
}
