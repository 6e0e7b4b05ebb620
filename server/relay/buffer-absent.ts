import type { AbsentDevice, AbsentDevices } from './buffer-types.ts';

/**
 * The buffer's record of the devices it keeps frames for, by room: made by `markAbsent` or
 * `restore`, counted by every append and every frame a bound drops, gone on expiry, a clean
 * leave, a revocation or the device's next join. Only the buffer writes it; the broker reads it
 * (`AbsentDevices`).
 */
export class AbsentRegistry implements AbsentDevices {
  readonly #byRoom = new Map<string, Map<string, AbsentDevice>>();
  #size = 0;

  get size(): number {
    return this.#size;
  }

  get(room: string, device: string): AbsentDevice | undefined {
    return this.#byRoom.get(room)?.get(device);
  }

  inRoom(room: string): IterableIterator<AbsentDevice> {
    return (this.#byRoom.get(room) ?? new Map<string, AbsentDevice>()).values();
  }

  countIn(room: string): number {
    return this.#byRoom.get(room)?.size ?? 0;
  }

  /** Starts keeping for `entry.device` in `entry.room` (replacing an older record of it). */
  set(entry: AbsentDevice): void {
    let devices = this.#byRoom.get(entry.room);
    if (devices === undefined) {
      devices = new Map();
      this.#byRoom.set(entry.room, devices);
    }
    if (!devices.has(entry.device)) this.#size++;
    devices.set(entry.device, entry);
  }

  delete(room: string, device: string): void {
    const devices = this.#byRoom.get(room);
    if (devices === undefined || !devices.delete(device)) return;
    this.#size--;
    if (devices.size === 0) this.#byRoom.delete(room);
  }

  /** A revoked device: kept for nowhere. */
  deleteEverywhere(device: string): void {
    for (const room of [...this.#byRoom.keys()]) this.delete(room, device);
  }
}
