import { describe, expect, it } from 'vitest';
import * as Y from 'yjs';
import { MemoryDevice, MemoryRoom } from './memory-devices.ts';
import { MemoryFs } from './memory-fs.ts';

/**
 * `.syncignore` rules from another device never send what this device kept to itself: a `!.*`
 * written on device B does not make device A upload its `.env` or `.ssh/`, across a restart of
 * A too; an edit of the rules on A itself does. Rules that keep more apply at once. Two engines
 * in memory (no host, no disk).
 */

function settle(devices: MemoryDevice[]): void {
  for (let round = 0; round < 5; round += 1) {
    for (const each of devices) {
      each.deliver();
      each.scan();
    }
  }
}

/** Whether `token` is anywhere in what the room (the host) holds. */
const onHost = (room: MemoryRoom, token: string) =>
  Buffer.from(Y.encodeStateAsUpdate(room.host)).includes(token);

async function pair() {
  const fs = new MemoryFs();
  const room = new MemoryRoom();
  const a = new MemoryDevice(fs, room, 1, '/a/notes', '/a/state.log');
  const b = new MemoryDevice(fs, room, 2, '/b/notes', '/b/state.log');
  fs.writeFile('/a/notes/notes.md', 'shared note\n');
  fs.writeFile('/a/notes/.env', 'TOKEN=secret-env-1\n');
  fs.mkdir('/a/notes/.ssh');
  fs.writeFile('/a/notes/.ssh/id_test', 'secret-key-2\n');
  await a.start();
  await b.start();
  settle([a, b]);
  expect(fs.textAt('/b/notes/notes.md')).toBe('shared note\n');
  return { fs, room, a, b };
}

describe('folder engine: what this device kept to itself', () => {
  it('stays here when another device widens the rules, also after a restart', async () => {
    const { fs, room, a, b } = await pair();
    fs.writeFile('/b/notes/.syncignore', '!.*\n');
    b.scan();
    settle([a, b]);
    // The rules reached A, and B's own dot files would go now; A's stay.
    expect(fs.textAt('/a/notes/.syncignore')).toBe('!.*\n');
    expect(onHost(room, 'secret-env-1')).toBe(false);
    expect(onHost(room, 'secret-key-2')).toBe(false);
    expect(fs.textAt('/b/notes/.env')).toBeUndefined();
    expect(a.lines.some((line) => line.includes('.env stays on this device'))).toBe(true);
    await a.stop();
    await a.start();
    settle([a, b]);
    expect(onHost(room, 'secret-env-1')).toBe(false);
    expect(onHost(room, 'secret-key-2')).toBe(false);
    // A file B makes where the rules now let it through still syncs.
    fs.writeFile('/b/notes/.editorconfig', 'root = true\n');
    b.scan();
    settle([a, b]);
    expect(fs.textAt('/a/notes/.editorconfig')).toBe('root = true\n');
    await a.stop();
    await b.stop();
  });

  it('goes once the rules are edited on this device', async () => {
    const { fs, room, a, b } = await pair();
    fs.writeFile('/b/notes/.syncignore', '!.*\n');
    b.scan();
    settle([a, b]);
    expect(onHost(room, 'secret-env-1')).toBe(false);
    // The user of A confirms: the rules edited here.
    fs.writeFile('/a/notes/.syncignore', '!.*\n# sent from here too\n');
    a.scan();
    settle([a, b]);
    expect(fs.textAt('/b/notes/.env')).toBe('TOKEN=secret-env-1\n');
    expect(fs.textAt('/b/notes/.ssh/id_test')).toBe('secret-key-2\n');
    await a.stop();
    await b.stop();
  });

  it('applies rules from another device that keep more at once', async () => {
    const { fs, room, a, b } = await pair();
    fs.writeFile('/b/notes/.syncignore', '*.log\n');
    b.scan();
    settle([a, b]);
    fs.writeFile('/a/notes/debug.log', 'secret-log-3\n');
    a.scan();
    settle([a, b]);
    expect(onHost(room, 'secret-log-3')).toBe(false);
    await a.stop();
    await b.stop();
  });
});
