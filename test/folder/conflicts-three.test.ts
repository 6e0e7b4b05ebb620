import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/wait.ts';
import { allSent, deviceFixture, type FolderDevice, putFile } from './devices.ts';

/**
 * A file that is not merged (binary), changed on three devices apart: every version is kept,
 * the most recent under the name and the two others under conflict names, the same three files
 * on every device, and each device's status lists the same two copies.
 */

const { fixture, devices } = deviceFixture('three', 3);

function read(dir: string, path: string): Buffer | undefined {
  try {
    return readFileSync(join(dir, path));
  } catch {
    return undefined;
  }
}

const copies = (dir: string) =>
  readdirSync(dir)
    .filter((name) => /^photo\.sync-conflict-\d{8}-\d{6}-.+\.bin$/.test(name))
    .sort();

describe('a binary file changed on three devices apart', () => {
  for (const order of ['one after the other', 'the newest edit first', 'all at once'] as const) {
    it(`keeps all three versions, the newest under the name and two conflict copies, alike on every device (back ${order})`, async () => {
      const all = await devices({ limits: { filesPerMinute: 1000, bytesPerMinute: 1 << 30 } });
      const [a, b, c] = all as [FolderDevice, FolderDevice, FolderDevice];
      putFile(a.dir, 'photo.bin', Buffer.concat([Buffer.from([0]), randomBytes(4096)]));
      try {
        for (const device of all) await device.start();
        for (const device of [b, c]) {
          await eventually(
            () => read(device.dir, 'photo.bin'),
            `photo.bin at ${device.dir}`,
            30_000,
          );
        }
        for (const device of all) {
          await device.flush();
          await device.stop();
        }
        // Each changes it while stopped, a first and c last (a second apart: the times order
        // them); back one after the other (each sends its version before the next starts), in
        // the other order (the newest edit reaches the host first, the oldest last), or all at
        // once (three versions meet on the host together).
        const sendAlone = async (device: FolderDevice) => {
          await device.start();
          await allSent(device, `${device.dir} sent its version`);
          await device.flush();
          await device.stop();
        };
        const versions: Buffer[] = [];
        for (const [i, device] of all.entries()) {
          if (i > 0) await new Promise((resolve) => setTimeout(resolve, 1_100));
          const version = Buffer.concat([Buffer.from([0, 0xa + i]), randomBytes(8192)]);
          versions.push(version);
          putFile(device.dir, 'photo.bin', version);
          if (order === 'one after the other') await sendAlone(device);
        }
        if (order === 'the newest edit first')
          for (const device of [c, b, a]) await sendAlone(device);
        await Promise.all(all.map((device) => device.start()));
        for (const device of all) {
          await eventually(
            () => {
              device.scan();
              const named = read(device.dir, 'photo.bin');
              return copies(device.dir).length === 2 && named?.equals(versions[2]!);
            },
            `three versions at ${device.dir}`,
            60_000,
          );
        }
        const names = copies(a.dir);
        // The two older versions, each under a copy named by the device that made it.
        for (const i of [0, 1]) {
          const id = fixture.credentials[i]!.deviceId;
          const name = names.find((n) => n.endsWith(`-${id}.bin`));
          expect(name, `a copy named by device ${id}`).toBeDefined();
          for (const device of all)
            expect(read(device.dir, name!)?.equals(versions[i]!)).toBe(true);
        }
        for (const device of all) {
          // What a device fetched ahead of a version that became a conflict copy went to it.
          await eventually(
            () => !readdirSync(device.dir).some((name) => name.endsWith('.sync-host-tmp')),
            `no temporary file left at ${device.dir}`,
            10_000,
          );
          expect(copies(device.dir)).toEqual(names);
          expect([...device.folder!.folderStatus().conflicts].sort()).toEqual(names);
        }
      } finally {
        for (const device of all) await device.stop();
      }
    }, 180_000);
  }
});
