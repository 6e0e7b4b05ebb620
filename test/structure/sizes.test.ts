import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');
const folder = mkdtempSync(join(tmpdir(), 'check-sizes-'));
afterAll(() => rmSync(folder, { recursive: true, force: true }));

/** `lines` lines in all, its first and last line included (a body of `lines - 2`). */
const body = (lines: number) =>
  Array.from({ length: lines - 2 }, (_, i) => `  const v${i} = ${i};`);

/** Runs the size check on `dir`: its exit code and the lines it printed. */
function checkSizes(dir: string): { code: number | null; lines: string[] } {
  const run = spawnSync(
    process.execPath,
    ['--import', 'tsx', join(root, 'scripts/check-sizes.ts'), dir],
    { cwd: root, encoding: 'utf8' },
  );
  return { code: run.status, lines: run.stdout.split('\n').filter((line) => line !== '') };
}

describe('check:sizes', () => {
  it('passes functions of 80 lines, of every kind', () => {
    const dir = join(folder, 'short');
    mkdirSync(dir);
    writeFileSync(
      join(dir, 'short.ts'),
      [
        'export function declared() {',
        ...body(80),
        '}',
        'export const arrow = () => {',
        ...body(80),
        '};',
      ].join('\n'),
    );
    expect(checkSizes(dir)).toEqual({ code: 0, lines: [] });
  });

  it('fails on a declaration, an arrow function, a method and a callback over 80 lines, each named with its file and line', () => {
    const dir = join(folder, 'long');
    mkdirSync(dir);
    const file = join(dir, 'long.ts');
    writeFileSync(
      file,
      [
        'export function declared() {', // line 1
        ...body(81),
        '}',
        'export const arrow = () => {', // line 82
        ...body(81),
        '};',
        'export class Holder {', // line 163
        '  method() {', // line 164
        ...body(81).map((line) => `  ${line}`),
        '  }',
        '}',
        'setTimeout(() => {', // line 246
        ...body(81),
        '});',
      ].join('\n'),
    );
    const { code, lines } = checkSizes(dir);
    expect(code).toBe(1);
    expect(lines).toEqual([
      `${file}:1 declared: 81 lines`,
      `${file}:82 arrow: 81 lines`,
      `${file}:164 method: 81 lines`,
      `${file}:246 (callback of setTimeout): 81 lines`,
    ]);
  });
});
