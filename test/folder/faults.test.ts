import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerProject, startTestHost, type TestHost } from '../helpers/host.ts';
import { eventually } from '../helpers/wait.ts';
import { FolderDevice, textFiles } from './devices.ts';

/**
 * A process killed between recording a batch from another device and putting its files in
 * place: the next start finishes the batch, so the folder and the state agree and nothing is
 * sent twice; a text the user changed while it was down is merged with the batch's edit.
 */
describe('folder sync: a kill between the record and the files, a folder that disappears', () => {
  let th: TestHost;
  let root: string;
  const credentials: { deviceId: number; deviceToken: string }[] = [];
  let rooms = 0;

  beforeAll(async () => {
    th = await startTestHost({ ui: false });
    root = mkdtempSync(join(tmpdir(), 'folder-crash-'));
    for (let i = 0; i < 2; i += 1)
      credentials.push(await th.signIn('crash@example.org', `crash-${i}`));
  });

  afterAll(async () => {
    await th?.close();
    if (root !== undefined) rmSync(root, { recursive: true, force: true });
  });

  /** Device one, and device two whose process dies at the next recorded batch once `armed`. */
  async function pair() {
    rooms += 1;
    const { roomId } = await registerProject(
      th.base,
      credentials[0]!.deviceToken,
      `crash-${rooms}`,
    );
    const base = join(root, `room-${rooms}`);
    const trap = { armed: false, fired: false };
    const one = new FolderDevice(
      th,
      roomId,
      credentials[0]!,
      join(base, 'one'),
      join(base, 'one.log'),
    );
    const options = {
      onRecorded: () => {
        if (!trap.armed || trap.fired) return;
        trap.fired = true;
        two.folder?.halt();
        throw new Error('killed');
      },
    };
    const two = new FolderDevice(
      th,
      roomId,
      credentials[1]!,
      join(base, 'two'),
      join(base, 'two.log'),
      options,
    );
    await one.start();
    await two.start();
    return { one, two, trap };
  }

  const settled = (one: FolderDevice, two: FolderDevice) =>
    eventually(
      () => {
        one.scan();
        two.scan();
        const a = textFiles(one.dir);
        return a !== undefined && JSON.stringify(a) === JSON.stringify(textFiles(two.dir))
          ? a
          : undefined;
      },
      'both folders alike',
      15_000,
    );

  /** An edit of `path` on device one; device two is killed once it has recorded that batch. */
  async function editAndKillTwo(
    { one, two, trap }: Awaited<ReturnType<typeof pair>>,
    path: string,
    text: string,
  ): Promise<void> {
    trap.armed = true;
    writeFileSync(join(one.dir, path), text);
    one.scan();
    await eventually(() => trap.fired, 'the kill of device two');
    await two.kill();
  }

  it('finishes the batch at the next start: the edit is there once, everywhere', async () => {
    const devices = await pair();
    const { one, two } = devices;
    writeFileSync(join(one.dir, 'notes.md'), 'first line\n');
    one.scan();
    expect(await settled(one, two)).toEqual({ 'notes.md': 'first line\n' });

    await editAndKillTwo(devices, 'notes.md', 'first line\nsecond line\n');
    // Killed after the record: the temporary file is written, the file itself not yet.
    expect(readFileSync(join(two.dir, 'notes.md'), 'utf8')).toBe('first line\n');
    expect(readdirSync(two.dir).some((name) => name.endsWith('.sync-host-tmp'))).toBe(true);

    await two.start();
    expect(readFileSync(join(two.dir, 'notes.md'), 'utf8')).toBe('first line\nsecond line\n');
    expect(await settled(one, two)).toEqual({ 'notes.md': 'first line\nsecond line\n' });
    // Nothing was taken for an edit of two's own and sent again.
    expect(two.lines.filter((line) => line.startsWith('sent'))).toEqual([]);
    expect(readdirSync(two.dir).some((name) => name.endsWith('.sync-host-tmp'))).toBe(false);
    await one.stop();
    await two.stop();
  }, 40_000);

  it('merges a text written by the user while the process was down, never a conflict copy', async () => {
    const devices = await pair();
    const { one, two } = devices;
    writeFileSync(join(one.dir, 'plan.md'), 'step one\n');
    one.scan();
    await settled(one, two);

    await editAndKillTwo(devices, 'plan.md', 'step one\nstep two\n');
    writeFileSync(join(two.dir, 'plan.md'), 'step one\nwritten while sync was down\n');

    await two.start();
    // Both added a line after the first: both lines kept, this device's first.
    expect(await settled(one, two)).toEqual({
      'plan.md': 'step one\nwritten while sync was down\nstep two\n',
    });
    await one.stop();
    await two.stop();
  }, 40_000);

  it('keeps files named __proto__ and constructor once each across a kill in the middle of a batch', async () => {
    const devices = await pair();
    const { one, two } = devices;
    for (const name of ['__proto__', 'constructor', 'notes/__proto__']) {
      mkdirSync(join(one.dir, 'notes'), { recursive: true });
      writeFileSync(join(one.dir, name), `${name}\n`);
    }
    one.scan();
    await settled(one, two);

    await editAndKillTwo(devices, '__proto__', '__proto__\nedited\n');
    await two.start();
    await settled(one, two);
    const expected = [
      ['__proto__', '__proto__\nedited\n'],
      ['constructor', 'constructor\n'],
      ['notes/__proto__', 'notes/__proto__\n'],
    ];
    for (const device of [one, two]) {
      const read = expected.map(([name]) => [name, readFileSync(join(device.dir, name!), 'utf8')]);
      expect(read).toEqual(expected);
      expect(readdirSync(device.dir, { recursive: true }).sort()).toEqual([
        '.sync-host-folder',
        '__proto__',
        'constructor',
        'notes',
        'notes/__proto__',
      ]);
    }
    // The state log read back at the start knew every file: nothing was sent as new or edited.
    expect(two.lines.filter((line) => line.startsWith('sent'))).toEqual([]);
    await one.stop();
    await two.stop();
  }, 40_000);

  it('takes a folder that was unmounted or removed for gone, not for every file deleted', async () => {
    const { one, two } = await pair();
    writeFileSync(join(one.dir, 'keep.md'), 'keep me\n');
    one.scan();
    await settled(one, two);
    // The disk under the folder goes away: the mount point is left, empty.
    rmSync(two.dir, { recursive: true, force: true });
    mkdirSync(two.dir);
    two.scan();
    expect(two.lines.some((line) => line.includes('is gone or not mounted'))).toBe(true);
    expect(two.lines.some((line) => line.includes('(deleted)'))).toBe(false);
    // A change from the other device waits too, and nothing is written into the empty folder.
    writeFileSync(join(one.dir, 'keep.md'), 'keep me\nand this\n');
    one.scan();
    await eventually(() => one.lines.includes('sent keep.md'), 'the edit sent');
    await eventually(
      () => JSON.stringify(two.folder?.shared.getMap('files').toJSON()).includes('and this'),
      'the edit at device two',
    );
    two.scan();
    expect(readdirSync(two.dir)).toEqual([]);
    expect(readFileSync(join(one.dir, 'keep.md'), 'utf8')).toBe('keep me\nand this\n');
    await one.stop();
    await two.stop();
  }, 40_000);
});
