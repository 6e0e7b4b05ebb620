import type { AuthClient } from '../auth-client.ts';
import { type DeviceOwner, projectDevices } from './project-room.ts';

/** Who the devices of a project are, looked up again when a device not known yet shows. */
export interface DeviceDirectory {
  known(): ReadonlyMap<string, DeviceOwner>;
  seen(devices: readonly string[]): void;
}

/** The devices of project `projectId` at the auth service, asked at start and for new devices. */
export function devicesOf(auth: AuthClient, projectId: number): DeviceDirectory {
  let known: ReadonlyMap<string, DeviceOwner> = new Map();
  let asking = false;
  const ask = () => {
    if (asking) return;
    asking = true;
    void projectDevices(auth, projectId)
      .then((found) => {
        if (found.size > 0) known = found;
      })
      .finally(() => {
        asking = false;
      });
  };
  ask();
  return {
    known: () => known,
    seen(devices) {
      if (devices.some((device) => !known.has(device))) ask();
    },
  };
}
