import { type DeviceId, deviceKey } from '../../protocol/relay-frames.ts';
import type { MemberRole } from '../../protocol/room-grant.ts';
import type { Admission } from './broker.ts';

/**
 * A room's record of its present devices on every node, in join order, and of its host, kept
 * from its line's events (`RoomListener`): the room reads it and never asks its broker. Its
 * connections on this process are `Room.members`; this is the room as a whole.
 */
export class MemberRecords {
  /** Present devices by key, in join order (the first is the longest present). */
  readonly #ids = new Map<string, DeviceId>();
  /** The roles of the devices present that are not the owner's (teams), by key. */
  readonly #roles = new Map<string, MemberRole>();
  #hostKey: string | undefined;

  /** Devices present in the room, on any node. */
  get size(): number {
    return this.#ids.size;
  }

  /** The key of the room's host; undefined when nobody is present. */
  get hostKey(): string | undefined {
    return this.#hostKey;
  }

  /** The device id of a device present, as it wrote it in its join. */
  idOf(device: string): DeviceId | undefined {
    return this.#ids.get(device);
  }

  /** Device ids present, in join order. */
  devices(): DeviceId[] {
    return [...this.#ids.values()];
  }

  /** The role of a device present that is not the owner's. */
  roleOf(device: string): MemberRole | undefined {
    return this.#roles.get(device);
  }

  /**
   * Every present device's role by key (`owner` for the owner's), when one is a member's;
   * undefined when all are the owner's.
   */
  roles(): Record<string, 'owner' | MemberRole> | undefined {
    if (this.#roles.size === 0) return undefined;
    const all: Record<string, 'owner' | MemberRole> = {};
    for (const key of this.#ids.keys()) all[key] = this.#roles.get(key) ?? 'owner';
    return all;
  }

  /** `joined`: put last; host when nobody else is (the room's first device). */
  joined(device: DeviceId, role?: MemberRole): void {
    const key = deviceKey(device);
    if (!this.#ids.has(key)) this.#ids.set(key, device);
    if (role !== undefined) this.#roles.set(key, role);
    this.#hostKey ??= key;
  }

  /** `left`: the host's place stays empty until the line names the next one. */
  left(device: DeviceId): void {
    const key = deviceKey(device);
    this.#ids.delete(key);
    this.#roles.delete(key);
    if (this.#hostKey === key) this.#hostKey = undefined;
  }

  /** `hostChanged`. */
  host(device: DeviceId): void {
    this.#hostKey = deviceKey(device);
  }

  /** `admitted`: the room as the line saw it when it registered the join. */
  admitted(admission: Admission): void {
    this.#ids.clear();
    this.#roles.clear();
    for (const device of admission.devices) this.#ids.set(deviceKey(device), device);
    for (const [key, role] of Object.entries(admission.roles)) this.#roles.set(key, role);
    this.#hostKey = admission.hostKey;
  }
}
