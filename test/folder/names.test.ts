import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { printable } from '../../client/cli/printable.ts';
import { conflictName } from '../../client/folder/conflicts.ts';
import { maxSegmentBytes, pathProblem } from '../../client/folder/names.ts';

const root = mkdtempSync(join(tmpdir(), 'folder-names-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('folder names: the one check for names from another device and from disk', () => {
  it.each([
    ['../escape.txt'],
    ['../../x'],
    ['sub/../../x'],
    ['../.bashrc'],
    ['/etc/passwd'],
    ['.git/config'],
    ['sub/.GIT/hooks/pre-commit'],
    ['.hg/hgrc'],
    ['.sync-host-folder'],
    ['notes/.a.md.0a1b2c3d.sync-host-tmp'],
    ['a\u0000b'],
    [''],
    ['.'],
    ['sub/'],
    ['a//b'],
    ['a\\..\\b'],
    ['x'.repeat(300)],
    [`${'d/'.repeat(3_000)}f`],
    ['con.txt'],
    ['sub/LPT1'],
    ['what?.md'],
    ['ends-with-dot.'],
    ['\u001b[31mred.md'],
    ['lone\ud800half.md'],
  ])('refuses %j', (name) => {
    expect(pathProblem(name)).toEqual(expect.any(String));
  });

  // Dot files are names like any other: whether they sync is the rules' business (.syncignore).
  it.each([['notes/.hidden'], ['.obsidian/app.json'], ['.syncignore'], ['a/.gitignore']])(
    'takes the dot name %j',
    (name) => {
      expect(pathProblem(name)).toBeUndefined();
    },
  );

  it.each([[null], [undefined], [42], [{ toString: () => 'a.md' }], [['a.md']]])(
    'refuses a name that is not a string: %j',
    (name) => {
      expect(pathProblem(name)).toBe('the name is not a string');
    },
  );

  it.each([
    ['notes.md'],
    ['a/b/c.txt'],
    ['café.md'],
    ['__proto__'],
    ['constructor'],
    ['日本語/メモ.md'],
  ])('accepts %j', (name) => {
    expect(pathProblem(name)).toBeUndefined();
  });

  it('never accepts a name that resolves outside the folder or onto it (any string)', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ unit: 'binary', maxLength: 40 }),
          fc
            .array(fc.constantFrom('..', '.', '', 'a', '/', '\\', '\u0000', 'b.md', '.git'), {
              maxLength: 8,
            })
            .map((parts) => parts.join('/')),
        ),
        (name) => {
          if (pathProblem(name) !== undefined) return;
          const target = resolve(root, name);
          const inside = relative(root, target);
          expect(inside.startsWith('..') || inside === '' || inside.startsWith('/')).toBe(false);
          expect(inside.split('/').join('/')).toBe(name);
        },
      ),
      { numRuns: 5_000 },
    );
  });

  it('names conflict copies after the version that lost, within the length limit', () => {
    const at = Date.UTC(2026, 10, 26, 9, 5, 7);
    expect(conflictName('notes/meeting.md', at, '12')).toBe(
      'notes/meeting.sync-conflict-20261126-090507-12.md',
    );
    expect(conflictName('Makefile', at, '3')).toBe('Makefile.sync-conflict-20261126-090507-3');
    const long = conflictName(`${'x'.repeat(250)}.md`, at, '7');
    expect(pathProblem(long)).toBeUndefined();
    expect(Buffer.byteLength(long)).toBeLessThanOrEqual(maxSegmentBytes);
    expect(long.endsWith('.sync-conflict-20261126-090507-7.md')).toBe(true);
  });

  it('escapes control characters and bidirectional overrides before printing', () => {
    expect(printable('a\u001b[31mb\u0007\r\n\u202e.md')).toBe(
      'a\\x1b[31mb\\x07\\x0d\\x0a\\u{202e}.md',
    );
    expect(printable('café 日本')).toBe('café 日本');
  });
});
