import type { AbsentDevice } from './buffer.ts';
import type { Connection } from './connection.ts';

/**
 * One room: the devices present (in join order, so the first is the longest connected), its
 * host, and the devices that dropped without leave and are being buffered for.
 */
export class Room {
  readonly id: string;
  /** `id` as JSON text, spliced into routed frames. */
  readonly idJson: string;
  /** djb2(id) slot. */
  readonly slot: number;
  /** Present devices by device key; Map order is join order. */
  readonly members = new Map<string, Connection>();
  readonly absent = new Map<string, AbsentDevice>();
  host: Connection | undefined;
  #roomMember: Buffer | undefined;

  constructor(id: string, slot: number) {
    this.id = id;
    this.idJson = JSON.stringify(id);
    this.slot = slot;
  }

  /** `,"room":<idJson>` as bytes, spliced into routed frames (made on the first one). */
  get roomMember(): Buffer {
    this.#roomMember ??= Buffer.from(`,"room":${this.idJson}`);
    return this.#roomMember;
  }

  /** Adds a device; the first device present becomes host. */
  add(conn: Connection): void {
    this.members.set(conn.device, conn);
    conn.room = this;
    if (this.host === undefined) this.host = conn;
  }

  /**
   * Puts `conn` in the place of the older connection of the same device: same join position,
   * same role. Nobody else sees a change.
   */
  replace(older: Connection, conn: Connection): void {
    this.members.set(conn.device, conn);
    conn.room = this;
    older.room = undefined;
    if (this.host === older) this.host = conn;
  }

  /**
   * Removes a device. When it was the host, the longest-connected remaining device becomes
   * host and is returned.
   */
  remove(conn: Connection): Connection | undefined {
    if (this.members.get(conn.device) !== conn) return undefined;
    this.members.delete(conn.device);
    conn.room = undefined;
    if (this.host !== conn) return undefined;
    const next = this.members.values().next();
    this.host = next.done ? undefined : next.value;
    return this.host;
  }

  /** Device ids present, as their clients wrote them, in join order. */
  deviceIds(): Array<string | number> {
    return Array.from(this.members.values(), (member) => member.deviceId);
  }

  /** Nobody present and nobody buffered for: the room can be forgotten. */
  get idle(): boolean {
    return this.members.size === 0 && this.absent.size === 0;
  }
}
