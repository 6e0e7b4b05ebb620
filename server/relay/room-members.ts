import { type DeviceId, deviceKey } from '../../protocol/relay-frames.ts';
import type { Admission } from './broker.ts';

/**
 * A room's record of its present devices on every node, in join order, and of its host, kept
 * from its line's events (`RoomListener`): the room reads it and never asks its broker. Its
 * connections on this process are `Room.members`; this is the room as a whole.
 */
export class MemberRecords {
  /** Present devices by key, in join order (the first is the longest present). */
  readonly #ids = new Map<string, DeviceId>();
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

  /** `joined`: put last; host when nobody else is (the room's first device). */
  joined(device: DeviceId): void {
    const key = deviceKey(device);
    if (!this.#ids.has(key)) this.#ids.set(key, device);
    this.#hostKey ??= key;
  }

  /** `left`: the host's place stays empty until the line names the next one. */
  left(device: DeviceId): void {
    const key = deviceKey(device);
    this.#ids.delete(key);
    if (this.#hostKey === key) this.#hostKey = undefined;
  }

  /** `hostChanged`. */
  host(device: DeviceId): void {
    this.#hostKey = deviceKey(device);
  }

  /** `admitted`: the room as the line saw it when it registered the join. */
  admitted(admission: Admission): void {
    this.#ids.clear();
    for (const device of admission.devices) this.#ids.set(deviceKey(device), device);
    this.#hostKey = admission.hostKey;
  }
}
