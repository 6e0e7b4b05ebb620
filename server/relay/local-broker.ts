import type { DeviceId } from '../../protocol/relay-frames.ts';
import type { MemberRole, ProjectRole } from '../../protocol/room-grant.ts';
import type { Logger } from '../log.ts';
import type {
  Broker,
  BrokerReport,
  DepartureReason,
  RoomLine,
  RoomListener,
  UnsentFrame,
} from './broker.ts';
import type { AbsentDevice, MessageBuffer } from './buffer.ts';
import type { RelayMetrics } from './metrics.ts';

export interface LocalBrokerOptions {
  /**
   * The SQLite buffer (`local-buffer.ts`), owned by the broker from now on (closed by its
   * `close`); its absent devices of the previous run are taken over at once.
   */
  buffer: MessageBuffer;
  metrics: RelayMetrics;
  logger: Logger;
  now: () => number;
  /** `buffer.seconds` in ms: how long a dropped device is kept for. */
  bufferWindowMs: number;
}

/**
 * The single-process broker: every device of a room is connected to this process or absent, so
 * the roster is a Map here (join order; the first is host) and a message for a device that is not
 * connected goes to the SQLite buffer while its window lasts.
 */
export class LocalBroker implements Broker {
  readonly buffer: MessageBuffer;
  readonly metrics: RelayMetrics;
  readonly logger: Logger;
  readonly now: () => number;
  readonly bufferWindowMs: number;
  /** Lines of rooms held by a Room or with devices kept for; forgotten when neither. */
  readonly lines = new Map<string, LocalRoomLine>();
  /** Revoked devices, as the buffer keeps them across restarts. */
  readonly #revoked: Map<string, number>;

  constructor(options: LocalBrokerOptions) {
    this.buffer = options.buffer;
    this.metrics = options.metrics;
    this.logger = options.logger;
    this.now = options.now;
    this.bufferWindowMs = options.bufferWindowMs;
    this.#revoked = this.buffer.revoked();
    for (const entry of this.buffer.restore(this.now())) this.#lineOf(entry.room);
  }

  #lineOf(roomId: string): LocalRoomLine {
    let line = this.lines.get(roomId);
    if (line === undefined) {
      line = new LocalRoomLine(roomId, this);
      this.lines.set(roomId, line);
    }
    return line;
  }

  open(roomId: string, listener: RoomListener): RoomLine {
    const line = this.#lineOf(roomId);
    line.listener = listener;
    line.tell(listener);
    return line;
  }

  revoke(device: string, revokedAt: number): void {
    this.#revoked.set(device, revokedAt);
    this.buffer.revoke(device, revokedAt);
    for (const line of [...this.lines.values()]) line.forgetIfIdle();
  }

  revokedAt(device: string): number | undefined {
    return this.#revoked.get(device);
  }

  sweep(): void {
    const at = this.now();
    for (const line of [...this.lines.values()]) {
      for (const entry of [...this.buffer.absent.inRoom(line.roomId)]) {
        line.kept(entry.device, at);
      }
    }
    try {
      this.buffer.purge(at);
    } catch (err: unknown) {
      this.logger.error({ err }, 'buffer purge failed');
    }
  }

  absentDevices(): number {
    return this.buffer.absent.size;
  }

  accepting(): boolean {
    return true;
  }

  settled(): undefined {
    return undefined;
  }

  /** Nothing leaves this process: a frame is kept (or delivered) when it is handled. */
  stored(): undefined {
    return undefined;
  }

  healthy(): boolean {
    return this.buffer.healthy();
  }

  describe(): BrokerReport {
    const { buffer } = this;
    return {
      stored: buffer.stored,
      pending: buffer.pending,
      bytes: buffer.bytes,
      fileBytes: buffer.fileBytes(),
      health: {},
      metrics: '',
    };
  }

  async close(): Promise<void> {
    this.buffer.close();
  }
}

/** The single-process broker on `options.buffer` (see `LocalBroker`). */
export function createLocalBroker(options: LocalBrokerOptions): Broker {
  return new LocalBroker(options);
}

/** One room as the local broker keeps it. */
class LocalRoomLine implements RoomLine {
  readonly roomId: string;
  readonly #broker: LocalBroker;
  listener: RoomListener | undefined;
  /** Present devices by key, in join order. */
  readonly present = new Map<string, DeviceId>();
  /** The roles of the present devices that are not the owner's (teams), by key. */
  readonly roles = new Map<string, MemberRole>();
  hostKey: string | undefined;

  constructor(roomId: string, broker: LocalBroker) {
    this.roomId = roomId;
    this.#broker = broker;
  }

  /** Tells a room that opens the line who is present (in-process: nobody, unless shut down). */
  tell(listener: RoomListener): void {
    for (const [key, device] of this.present) listener.joined(device, this.roles.get(key));
    const host = this.hostKey === undefined ? undefined : this.present.get(this.hostKey);
    if (host !== undefined) listener.hostChanged(host, false);
  }

  join(device: DeviceId, ticket: number, role: ProjectRole = 'owner'): void {
    const key = typeof device === 'number' ? String(device) : device;
    const isNew = !this.present.has(key);
    // a device already present keeps its place in the Map (and so its role)
    this.present.set(key, device);
    const member = role === 'owner' ? undefined : role;
    if (member === undefined) this.roles.delete(key);
    else this.roles.set(key, member);
    this.hostKey ??= key;
    const { frames, gap } = this.#takeOver(key);
    this.#broker.buffer.present(this.roomId, key);
    const devices = [...this.present.values()];
    const roles = Object.fromEntries(this.roles);
    this.listener?.admitted(ticket, { devices, roles, hostKey: this.hostKey, frames, gap });
    if (isNew) this.listener?.joined(device, member);
  }

  /** What the buffer kept for a joining device; its record of the device's absence ends. */
  #takeOver(key: string): { frames: readonly string[]; gap: boolean } {
    let taken: { frames: readonly string[]; gap: boolean } | undefined;
    try {
      this.#broker.buffer.takeOver(this.roomId, key, this.#broker.now(), (frames, gap) => {
        taken = { frames, gap };
        this.#broker.metrics.bufferDelivered += frames.length;
      });
    } catch (err: unknown) {
      // The join still succeeds; the client learns from gap that it must resync.
      this.#broker.logger.error(
        { err, room: this.roomId, device: key },
        'buffer read failed on join',
      );
    }
    return taken ?? { frames: [], gap: true };
  }

  depart(device: string, reason: DepartureReason, unsent: readonly UnsentFrame[]): void {
    const id = this.present.get(device);
    if (id === undefined) {
      this.#keep(device, unsent);
      return;
    }
    this.present.delete(device);
    this.roles.delete(device);
    let newHost: DeviceId | undefined;
    if (this.hostKey === device) {
      const next = this.present.keys().next();
      this.hostKey = next.done ? undefined : next.value;
      if (this.hostKey !== undefined) newHost = this.present.get(this.hostKey);
    }
    if (reason === 'disconnect') this.keepFor(device, this.#broker.now());
    else this.#broker.buffer.forget(this.roomId, device);
    this.#keep(device, unsent);
    this.listener?.left(id, reason);
    if (newHost !== undefined) this.listener?.hostChanged(newHost, true);
  }

  /** Keeps a departed device's unsent frames, in order, while it is kept for. */
  #keep(device: string, unsent: readonly UnsentFrame[]): void {
    for (const { frame } of unsent) this.sendTo(device, frame);
  }

  /** Starts keeping messages for a device that dropped at `at`. */
  keepFor(device: string, at: number): void {
    this.#broker.buffer.markAbsent(this.roomId, device, at);
  }

  /** The device's entry while its window lasts; an entry whose window passed is expired. */
  kept(device: string, at: number): AbsentDevice | undefined {
    const entry = this.#broker.buffer.absent.get(this.roomId, device);
    if (entry === undefined) return undefined;
    if (at < entry.droppedAt + this.#broker.bufferWindowMs) return entry;
    this.expire(entry, at);
    return undefined;
  }

  expire(entry: AbsentDevice, at: number): void {
    this.#broker.buffer.expire(entry, at);
    this.forgetIfIdle();
  }

  sendTo(device: string, frame: Buffer): boolean {
    const entry = this.kept(device, this.#broker.now());
    if (entry === undefined) return false;
    this.#broker.buffer.append([entry], frame.toString('utf8'), frame.length);
    this.#broker.metrics.messagesBuffered++;
    return true;
  }

  broadcast(frame: Buffer): void {
    const { absent } = this.#broker.buffer;
    if (absent.countIn(this.roomId) === 0) return;
    const at = this.#broker.now();
    const kept: AbsentDevice[] = [];
    // expiring the current entry while iterating the room's devices is safe
    for (const entry of absent.inRoom(this.roomId)) {
      if (at < entry.droppedAt + this.#broker.bufferWindowMs) kept.push(entry);
      else this.expire(entry, at);
    }
    if (kept.length === 0) return;
    // stored once, referenced by each absent device
    this.#broker.buffer.append(kept, frame.toString('utf8'), frame.length);
    this.#broker.metrics.messagesBuffered += kept.length;
  }

  notice(_frame: Buffer): void {
    // every present device is connected to this process, and an absent one is told nothing
  }

  dropAll(unsent: ReadonlyMap<string, readonly UnsentFrame[]>): void {
    const at = this.#broker.now();
    for (const device of this.present.keys()) this.keepFor(device, at);
    this.present.clear();
    this.roles.clear();
    this.hostKey = undefined;
    for (const [device, frames] of unsent) this.#keep(device, frames);
  }

  release(): void {
    this.listener = undefined;
    this.forgetIfIdle();
  }

  forgetIfIdle(): void {
    const idle = this.listener === undefined && this.present.size === 0;
    if (idle && this.#broker.buffer.absent.countIn(this.roomId) === 0) {
      this.#broker.lines.delete(this.roomId);
    }
  }
}
