import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as Y from 'yjs';
import { eventually } from '../helpers/wait.ts';
import { type FolderDevice, putFile, twoDeviceFixture } from './devices.ts';

/**
 * `.syncignore` on two devices of one folder, through the real host: what it matches (and dot
 * files it does not re-include) is never sent, written, moved or deleted; the rules themselves
 * sync; a file that becomes ignored stays as it is on every device; one let through again syncs.
 */

const { twoDevices: devicesOf } = twoDeviceFixture('ignore');
const put = putFile;

function read(dir: string, path: string): string | undefined {
  try {
    return readFileSync(join(dir, path), 'utf8');
  } catch {
    return undefined;
  }
}

/** Whether `token` is anywhere in what this device's folder document holds (and so sends). */
function sent(device: FolderDevice, token: string): boolean {
  const doc = device.folder?.shared;
  if (doc === undefined) throw new Error('not running');
  return Buffer.from(Y.encodeStateAsUpdate(doc)).includes(token);
}

/** Two devices on a fresh project; their folders and what each wrote before starting. */
async function twoDevices(before: { a?: Record<string, string>; b?: Record<string, string> }) {
  const [a, b] = await devicesOf();
  for (const [path, text] of Object.entries(before.a ?? {})) put(a.dir, path, text);
  for (const [path, text] of Object.entries(before.b ?? {})) put(b.dir, path, text);
  await a.start();
  await b.start();
  return { a, b };
}

const rules = '# kept here\n*.log\nbuild/\n!.obsidian/\n';

describe('.syncignore', () => {
  it('keeps what it matches and dot files on their device, and syncs the rest and itself', async () => {
    const { a, b } = await twoDevices({
      a: {
        '.syncignore': rules,
        'notes.md': 'notes-a1\n',
        'x.log': 'secret-log-a2\n',
        'build/out.md': 'secret-build-a3\n',
        'sub/build/deep.md': 'secret-build-a4\n',
        '.hidden.md': 'secret-dot-a5\n',
        '.obsidian/app.json': '{"theme":"obsidian-a6"}\n',
        '.obsidian/.cache': 'secret-dot-a7\n',
        '.git/config': '[core]\n\tfsmonitor = secret-git-a8\n',
      },
      b: { '.syncignore': rules },
    });
    try {
      await eventually(
        () => read(b.dir, '.obsidian/app.json') !== undefined && read(b.dir, 'notes.md'),
        'notes.md and .obsidian/app.json at b',
        15_000,
      );
      expect(read(b.dir, 'notes.md')).toBe('notes-a1\n');
      expect(read(b.dir, '.obsidian/app.json')).toBe('{"theme":"obsidian-a6"}\n');
      expect(read(b.dir, '.syncignore')).toBe(rules);

      // Written at b once b has the rules: they stay at b too.
      put(b.dir, 'later.log', 'secret-log-b1\n');
      put(b.dir, 'build/b.md', 'secret-build-b2\n');
      put(b.dir, 'from-b.md', 'from-b3\n');
      b.scan();
      await eventually(() => read(a.dir, 'from-b.md'), 'from-b.md at a', 15_000);
      a.scan();
      b.scan();

      for (const token of [
        'secret-log-a2',
        'secret-build-a3',
        'secret-build-a4',
        'secret-dot-a5',
        'secret-dot-a7',
        'secret-git-a8',
      ]) {
        expect(sent(a, token), `a sent ${token}`).toBe(false);
      }
      for (const token of ['secret-log-b1', 'secret-build-b2']) {
        expect(sent(b, token), `b sent ${token}`).toBe(false);
      }
      expect(sent(a, 'notes-a1')).toBe(true); // the check can see what is sent
      for (const path of ['x.log', 'build/out.md', 'sub/build/deep.md', '.hidden.md', '.git']) {
        expect(existsSync(join(b.dir, path)), path).toBe(false);
      }
      expect(existsSync(join(b.dir, '.obsidian/.cache'))).toBe(false);
      expect(existsSync(join(a.dir, 'later.log'))).toBe(false);
      expect(existsSync(join(a.dir, 'build/b.md'))).toBe(false);
      // Each device's ignored files are as it wrote them.
      expect(read(a.dir, 'x.log')).toBe('secret-log-a2\n');
      expect(read(b.dir, 'later.log')).toBe('secret-log-b1\n');
    } finally {
      await a.stop();
      await b.stop();
    }
  }, 60_000);

  it('leaves a file that became ignored alone on every device, and syncs it again once let through', async () => {
    const { a, b } = await twoDevices({ a: { 'drafts/d.md': 'draft one\n' } });
    try {
      await eventually(
        () => read(b.dir, 'drafts/d.md') === 'draft one\n',
        'the draft at b',
        15_000,
      );

      // a ignores drafts/ from now on; the rule reaches b.
      put(a.dir, '.syncignore', 'drafts/\n');
      a.scan();
      await eventually(() => read(b.dir, '.syncignore') === 'drafts/\n', 'the rules at b', 15_000);
      b.scan();
      a.scan();

      // An edit at a and a delete at b, both ignored: neither reaches the other device.
      put(a.dir, 'drafts/d.md', 'draft two, kept here\n');
      rmSync(join(b.dir, 'drafts/d.md'));
      a.scan();
      b.scan();
      put(a.dir, 'marker.md', 'after the ignored changes\n');
      a.scan();
      await eventually(() => read(b.dir, 'marker.md'), 'marker.md at b', 15_000);
      b.scan();
      a.scan();
      expect(read(a.dir, 'drafts/d.md')).toBe('draft two, kept here\n');
      expect(existsSync(join(b.dir, 'drafts/d.md'))).toBe(false);
      expect(sent(a, 'kept here')).toBe(false);

      // Let through again: a's edit wins over b's delete (an edit anywhere wins), everywhere.
      put(a.dir, '.syncignore', '');
      a.scan();
      await eventually(
        () => read(b.dir, 'drafts/d.md') === 'draft two, kept here\n',
        'the draft back at b',
        15_000,
      );
      a.scan();
      expect(read(a.dir, 'drafts/d.md')).toBe('draft two, kept here\n');
    } finally {
      await a.stop();
      await b.stop();
    }
  }, 60_000);

  it('never syncs a .git folder, whatever the rules say', async () => {
    const { a, b } = await twoDevices({
      a: { '.syncignore': '!.*\n', '.git/config': 'secret-git-c1\n', '.env.md': 'dot-c2\n' },
    });
    try {
      await eventually(() => read(b.dir, '.env.md'), '.env.md at b', 15_000);
      b.scan();
      a.scan();
      expect(sent(a, 'secret-git-c1')).toBe(false);
      expect(existsSync(join(b.dir, '.git'))).toBe(false);
      expect(a.lines.join('\n')).toContain('.git folder is never synced');
    } finally {
      await a.stop();
      await b.stop();
    }
  }, 60_000);
});
