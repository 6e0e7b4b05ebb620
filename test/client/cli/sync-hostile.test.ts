import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as Y from 'yjs';
import { printable } from '../../../client/cli/printable.ts';
import type { CliRun } from '../../helpers/cli-process.ts';
import { eventually } from '../../helpers/wait.ts';
import { type Attacker, readIf, syncScope, tree } from './sync-peers.ts';

const scope = syncScope('hostile@example.org');

/**
 * A victim running `sync` on `home/notes`, with things around it a bad name could reach: a
 * sentinel file, the victim's own config (credentials.json), a folder its `link` points to, and
 * a real `.git` folder inside; and an attacker, another device of the same user.
 */
async function victimAndAttacker() {
  const base = scope.tempDir();
  const home = join(base, 'home');
  const notes = join(home, 'notes');
  const outside = join(home, 'outside-dir');
  const secret = `SENTINEL-${randomBytes(8).toString('hex')}`;
  mkdirSync(join(home, 'sentinel'), { recursive: true });
  writeFileSync(join(home, 'sentinel', 'secret.txt'), `${secret}\n`);
  mkdirSync(outside);
  writeFileSync(join(outside, 'existing.txt'), `${secret} outside\n`);
  mkdirSync(join(notes, '.git'), { recursive: true });
  writeFileSync(join(notes, '.git', 'config'), '[core]\n\tbare = false\n');
  symlinkSync(outside, join(notes, 'link'));
  const victim = await scope.device('victim', join(home, 'config'));
  const token = victim.deviceToken;
  const attackerDevice = await scope.device('attacker');
  const { key, roomId } = await scope.project(victim);
  const run = await scope.sync(victim, key, notes);
  const attacker = await scope.attacker(roomId, attackerDevice);
  return { base, home, notes, secret, token, run, attacker };
}

let canaries = 0;

/**
 * A new file from the attacker, waited for on the victim's disk: what came before is applied.
 * A failure shows what the victim printed.
 */
async function canary(attacker: Attacker, notes: string, run: CliRun): Promise<string> {
  canaries += 1;
  const name = `canary-${canaries}.md`;
  attacker.entry(name, `${name}\n`);
  try {
    await eventually(
      () => readIf(join(notes, name)) === `${name}\n`,
      `${name} at the victim`,
      10_000,
    );
  } catch (err: unknown) {
    throw new Error(
      `${(err as Error).message}; the victim printed:\n${run.out.stderr.slice(-2_000)}`,
    );
  }
  return name;
}

/** The hostile paths, each relative to the victim's folder `home/notes`. */
const hostilePaths = [
  '../escape.txt',
  '../../x',
  'sub/../../x',
  '../.bashrc',
  '../config/credentials.json',
  '../sentinel/secret.txt',
  '/etc/abs',
  '.git/config',
  'link/pwned.txt',
  'nul\0name.md',
  '',
  '.',
  'trailing/',
  'back\\slash.md',
  '..\\..\\win.md',
  'n'.repeat(300),
  `${`${'d'.repeat(99)}/`.repeat(60)}f.md`,
  '\x1b[31mred.md',
];

/** Entries that are not files at all: adds one; resolves with its id. */
const malformed: Record<string, (attacker: Attacker) => string> = {
  null: (a) => put(a, null),
  'a number': (a) => put(a, 42),
  'a map whose path is a number': (a) => a.entry(7),
  'a map whose text is a string': (a) => a.entry('plain.md', '', { text: 'a string' }),
  'a map with only a path': (a) => put(a, new Y.Map<unknown>([['path', 'only-path.md']])),
  'a map with no time or device': (a) => a.entry('untimed.md', 'x\n', { time: 'now', device: 3 }),
  undefined: (a) => put(a, undefined),
  'an object whose toString is 1': (a) => put(a, { toString: 1 }),
  'a map whose path is such an object': (a) => a.entry({ toString: 1 }),
  'a text instead of a map': (a) => put(a, new Y.Text('not an entry\n')),
};

function put(attacker: Attacker, value: unknown): string {
  const id = `e${randomBytes(6).toString('hex')}`;
  attacker.files.set(id, value);
  return id;
}

function alive(run: CliRun): void {
  expect(run.child.exitCode, run.out.stderr).toBeNull();
}

describe('sync-host sync: names and entries from a hostile device of the same user', () => {
  it('writes, reads and deletes nothing outside the folder, sends nothing from outside, and keeps running', async () => {
    const { base, notes, secret, token, run, attacker } = await victimAndAttacker();
    expect(existsSync('/etc/abs')).toBe(false);
    const outsideBefore = tree(base, ['home/notes', 'home/config/sync-state']);
    const ids = hostilePaths.map((path) => attacker.entry(path, 'PWNED\n'));
    for (const add of Object.values(malformed)) add(attacker);
    await canary(attacker, notes, run);
    alive(run);

    // Edited, tombstoned, then removed: nothing of what those paths point at is read or sent.
    for (const id of ids) {
      const text = (attacker.files.get(id) as Y.Map<unknown>).get('text') as Y.Text;
      text.insert(0, 'more\n');
    }
    await canary(attacker, notes, run);
    for (const id of ids) attacker.tombstone(id);
    await canary(attacker, notes, run);
    for (const id of ids) attacker.files.delete(id);
    const last = await canary(attacker, notes, run);
    alive(run);

    expect(tree(base, ['home/notes', 'home/config/sync-state'])).toEqual(outsideBefore);
    expect(existsSync('/etc/abs')).toBe(false);
    expect(tree(notes)).toEqual({
      '.git': 'folder',
      '.git/config': '[core]\n\tbare = false\n',
      link: `link → ${join(base, 'home', 'outside-dir')}`,
      ...Object.fromEntries(
        Array.from({ length: 4 }, (_, i) => {
          const name = `canary-${canaries - 3 + i}.md`;
          return [name, `${name}\n`];
        }),
      ),
    });
    expect(last).toBe(`canary-${canaries}.md`);
    expect(attacker.saw(secret)).toBe(false);
    expect(attacker.saw(token)).toBe(false);
    expect(run.out.stdout + run.out.stderr).not.toContain('\x1b');
  }, 40_000);

  it('prints one line per bad entry, its name escaped, and never the same line again', async () => {
    const { notes, run, attacker } = await victimAndAttacker();
    const cases: [string, () => string, string | undefined][] = [
      ...hostilePaths.map(
        (path) =>
          [JSON.stringify(path).slice(0, 60), () => attacker.entry(path), path] as [
            string,
            () => string,
            string,
          ],
      ),
      ...Object.entries(malformed).map(
        ([what, add]) =>
          [what, () => add(attacker), undefined] as [string, () => string, undefined],
      ),
    ];
    // The lines about an entry: those with its id, else those with its (escaped) name.
    const about = (id: string, path: string | undefined) => {
      const lines = run.out.stderr.split('\n');
      const byId = lines.filter((line) => line.includes(id));
      if (byId.length > 0 || path === undefined || path.length < 3) return byId;
      return lines.filter((line) => line.includes(printable(path).slice(0, 40)));
    };
    const added: [string, string, string | undefined][] = [];
    for (const [what, add, path] of cases) {
      const id = add();
      added.push([what, id, path]);
      await canary(attacker, notes, run);
      await eventually(() => about(id, path).length > 0, `a line about ${what}`, 1_500).catch(
        () => undefined,
      );
    }
    // More scans (each local file is one) print none of them again.
    const before = run.out.stderr;
    for (const name of ['here-1.md', 'here-2.md']) {
      writeFileSync(join(notes, name), `${name}\n`);
      await eventually(() => attacker.idsOf(name).length === 1, `${name} sent`, 10_000);
    }
    const counts = added.map(([what, id, path]) => [what, about(id, path).length]);
    expect(counts).toEqual(added.map(([what]) => [what, 1]));
    expect(run.out.stderr.slice(before.length)).toBe('');
    expect(run.out.stdout + run.out.stderr).not.toContain('\x1b');
    expect(run.out.stderr).toContain(printable('\x1b[31mred.md'));
    alive(run);
  }, 60_000);

  it('leaves the real .git folder and a linked folder alone', async () => {
    const { base, notes, run, attacker } = await victimAndAttacker();
    attacker.entry('.git/config', '[core]\n\thooksPath = /tmp/evil\n');
    attacker.entry('link/pwned.txt', 'PWNED\n');
    await canary(attacker, notes, run);
    expect(readFileSync(join(notes, '.git', 'config'), 'utf8')).toBe('[core]\n\tbare = false\n');
    expect(tree(join(base, 'home', 'outside-dir'))).toEqual({
      'existing.txt': expect.stringContaining('outside'),
    });
    expect(tree(notes, ['.git'])).toEqual({
      link: `link → ${join(base, 'home', 'outside-dir')}`,
      [`canary-${canaries}.md`]: `canary-${canaries}.md\n`,
    });
    expect(run.out.stderr).toMatch(/^skipped link: a symbolic link/m);
    expect(run.out.stderr).toMatch(/^not written link\/pwned\.txt: link is a symbolic link/m);
    alive(run);
  });

  it('syncs a file named __proto__ like any other, without doubling its text', async () => {
    const { notes, run, attacker } = await victimAndAttacker();
    const id = attacker.entry('__proto__', 'one\n');
    const file = join(notes, '__proto__');
    await eventually(() => readIf(file) === 'one\n', '__proto__ at the victim');
    const text = (attacker.files.get(id) as Y.Map<unknown>).get('text') as Y.Text;
    text.insert(text.length, 'two\n');
    await eventually(() => readIf(file) === 'one\ntwo\n', 'the remote edit at the victim');
    writeFileSync(file, 'one\ntwo\nthree\n');
    await eventually(() => text.toString() === 'one\ntwo\nthree\n', 'the local edit sent');
    text.insert(0, 'zero\n');
    await eventually(() => readIf(file) === 'zero\none\ntwo\nthree\n', 'the second remote edit');
    await canary(attacker, notes, run);
    expect(readIf(file)).toBe('zero\none\ntwo\nthree\n');
    expect(text.toString()).toBe('zero\none\ntwo\nthree\n');
    expect(attacker.idsOf('__proto__')).toEqual([id]);
    alive(run);
  });

  it('keeps working after an entry with a time past what a date can hold', async () => {
    const { notes, run, attacker } = await victimAndAttacker();
    writeFileSync(join(notes, 'past.md'), 'mine\n');
    await eventually(() => attacker.idsOf('past.md').length === 1, 'past.md sent', 10_000);
    attacker.entry('past.md', 'x\n', { time: -1e20 });
    attacker.entry('clash.md', 'first\n', { time: 1e20 });
    attacker.entry('clash.md', 'second\n', { time: 1e20 });
    await canary(attacker, notes, run);
    const files = Object.entries(tree(notes, ['.git', 'link']));
    const contents = (prefix: string) =>
      files.filter(([name]) => name.startsWith(prefix)).map(([, content]) => content);
    expect(contents('clash').sort()).toEqual(['first\n', 'second\n']);
    expect(contents('past').sort()).toEqual(['mine\n', 'x\n']);
    expect(run.out.stderr).not.toContain('problem:');
    alive(run);
  });

  it('gives a file named like a synced folder its conflict name', async () => {
    const { notes, run, attacker } = await victimAndAttacker();
    mkdirSync(join(notes, 'docs'));
    writeFileSync(join(notes, 'docs', 'a.md'), 'alpha\n');
    await eventually(() => attacker.idsOf('docs/a.md').length === 1, 'docs/a.md sent', 10_000);
    attacker.entry('docs', 'a file named like the folder\n');
    await canary(attacker, notes, run);
    const files = tree(notes, ['.git', 'link']);
    expect(files['docs/a.md']).toBe('alpha\n');
    const copies = Object.keys(files).filter((name) =>
      /^docs\.sync-conflict-\d{8}-\d{6}-\d+$/.test(name),
    );
    expect(copies.map((name) => files[name])).toEqual(['a file named like the folder\n']);
    alive(run);
  });

  it('skips a local file whose name is not UTF-8 with one line', async () => {
    const { notes, run, attacker } = await victimAndAttacker();
    writeFileSync(Buffer.from(join(notes, 'caf\xe9.md'), 'latin1'), 'café\n');
    for (const name of ['after-1.md', 'after-2.md']) {
      writeFileSync(join(notes, name), `${name}\n`);
      await eventually(() => attacker.idsOf(name).length === 1, `${name} sent`, 10_000);
    }
    const lines = run.out.stderr.split('\n').filter((line) => line.includes('not valid UTF-8'));
    expect(lines).toHaveLength(1);
    alive(run);
  });

  it('leaves a symbolic link where it is when another device sends a file of its name', async () => {
    const { base, notes, run, attacker } = await victimAndAttacker();
    attacker.entry('link', 'a file where the link is\n');
    await canary(attacker, notes, run);
    const files = tree(notes, ['.git']);
    expect(files.link).toBe(`link → ${join(base, 'home', 'outside-dir')}`);
    expect(Object.values(files).filter((value) => value.startsWith('link →'))).toHaveLength(1);
    alive(run);
  });

  it('leaves a folder whose files do not sync where it is when another device sends a file of its name', async () => {
    const { notes, run, attacker } = await victimAndAttacker();
    mkdirSync(join(notes, 'pics', '.git'), { recursive: true });
    writeFileSync(join(notes, 'pics', 'p.png'), Buffer.from([0x89, 0x50, 0, 1]));
    writeFileSync(join(notes, 'pics', '.git', 'HEAD'), 'ref: refs/heads/main\n');
    attacker.entry('pics', 'a file named like the folder\n');
    await canary(attacker, notes, run);
    expect(tree(notes, ['.git', 'link'])).toMatchObject({
      pics: 'folder',
      'pics/p.png': Buffer.from([0x89, 0x50, 0, 1]).toString('latin1'),
      'pics/.git/HEAD': 'ref: refs/heads/main\n',
    });
    alive(run);
  });

  it('keeps a synced file whose entry another device set to undefined or removed, as for null', async () => {
    const { notes, run, attacker } = await victimAndAttacker();
    for (const name of ['null.md', 'undefined.md', 'removed.md']) {
      writeFileSync(join(notes, name), `${name}\n`);
    }
    await eventually(() => attacker.idsOf('removed.md').length === 1, 'the files sent', 10_000);
    attacker.files.set(attacker.idsOf('null.md')[0]!, null);
    attacker.files.set(attacker.idsOf('undefined.md')[0]!, undefined);
    attacker.files.delete(attacker.idsOf('removed.md')[0]!);
    await canary(attacker, notes, run);
    expect(tree(notes, ['.git', 'link'])).toMatchObject({
      'null.md': 'null.md\n',
      'undefined.md': 'undefined.md\n',
      'removed.md': 'removed.md\n',
    });
  });

  it('puts a local edit where it was made in a text that holds an embed', async () => {
    const { notes, run, attacker } = await victimAndAttacker();
    const id = attacker.entry('embed.md', 'hello world\n');
    const file = join(notes, 'embed.md');
    await eventually(() => readIf(file) === 'hello world\n', 'embed.md at the victim');
    const text = (attacker.files.get(id) as Y.Map<unknown>).get('text') as Y.Text;
    text.insertEmbed(0, { image: 'x' });
    await canary(attacker, notes, run);
    writeFileSync(file, 'hello brave world\n');
    await eventually(() => text.toString() !== 'hello world\n', 'the edit sent', 10_000);
    expect(text.toString()).toBe('hello brave world\n');
  });
});
