import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { authEnvNames, authKeyNames, authKeyValues } from '../../server/config/auth-config.ts';
import {
  buildRelayConfig,
  relayEnvNames,
  relayKeyNames,
} from '../../server/config/relay-config.ts';

const docPath = resolve(import.meta.dirname, '../../docs/configuration.md');
const doc = readFileSync(docPath, 'utf8');

/** The rows of the first table under the `## <heading>` section, as lists of cells. */
function tableUnder(heading: string): string[][] {
  const start = doc.indexOf(`\n## ${heading}\n`);
  expect(start, `a "## ${heading}" section in docs/configuration.md`).toBeGreaterThan(-1);
  const end = doc.indexOf('\n## ', start + 1);
  const section = doc.slice(start, end === -1 ? undefined : end);
  const rows = section
    .split('\n')
    .filter((line) => line.startsWith('|'))
    .map((line) =>
      line
        .slice(1, -1)
        .split('|')
        .map((cell) => cell.trim()),
    );
  // The header and the |---| line.
  return rows.slice(2);
}

/** The backticked words of a cell: `DB_PASS`, `DB_PASSWORD` → [DB_PASS, DB_PASSWORD]. */
const codes = (cell: string | undefined) =>
  [...(cell ?? '').matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? '');

/** Per field of the code, its spellings and its environment variable (or none). */
function fromCode(names: Record<string, readonly string[]>, env: Record<string, string>) {
  return Object.entries(names)
    .map(([field, spellings]) => ({ spellings: [...spellings].sort(), env: env[field] ?? 'none' }))
    .sort((a, b) => (a.spellings[0] ?? '').localeCompare(b.spellings[0] ?? ''));
}

/** Per row of the doc's table, its spellings (first column) and environment variable (second). */
function fromDoc(rows: string[][]) {
  return rows
    .map((row) => ({
      spellings: codes(row[0]).sort(),
      env: codes(row[1])[0] ?? row[1] ?? '',
    }))
    .sort((a, b) => (a.spellings[0] ?? '').localeCompare(b.spellings[0] ?? ''));
}

describe('docs/configuration.md', () => {
  it('lists every auth.conf key the code accepts, each spelling and its environment variable, and nothing else', () => {
    const rows = tableUnder('auth.conf');
    expect(fromDoc(rows)).toEqual(fromCode(authKeyNames, authEnvNames));
  });

  it('lists every relay.conf key the code accepts, each spelling and its environment variable, and nothing else', () => {
    const rows = tableUnder('relay.conf');
    expect(fromDoc(rows)).toEqual(fromCode(relayKeyNames, relayEnvNames));
  });

  it('gives every key a default, a meaning and an example that sets that key', () => {
    for (const heading of ['auth.conf', 'relay.conf']) {
      for (const row of tableUnder(heading)) {
        expect(row, `a row of the ${heading} table`).toHaveLength(5);
        const [spellings, , fallback, meaning, example] = row;
        expect(fallback, `default of ${spellings}`).not.toBe('');
        expect(meaning, `meaning of ${spellings}`).not.toBe('');
        const set = codes(example)[0] ?? '';
        expect(codes(spellings), `the example of ${spellings}`).toContain(
          set.slice(0, set.indexOf('=')),
        );
      }
    }
  });

  it('gives each key the default the code has', () => {
    const defaults = {
      'auth.conf': { names: authKeyNames, values: authKeyValues({}) as Record<string, unknown> },
      'relay.conf': {
        names: relayKeyNames,
        values: buildRelayConfig([], 'relay.conf', '/conf', '/conf/data') as Record<
          string,
          unknown
        >,
      },
    };
    for (const [heading, { names, values }] of Object.entries(defaults)) {
      const rows = tableUnder(heading);
      for (const [field, spellings] of Object.entries(names)) {
        const row = rows.find((r) => codes(r[0]).includes(spellings[0] ?? ''));
        const cell = row?.[2] ?? '';
        const value = values[field];
        const what = `the default of ${spellings[0]} in the ${heading} table`;
        // Written as a number (a size also in MiB), a word in backquotes, on/off, or empty.
        if (typeof value === 'number') expect(cell, what).toMatch(new RegExp(`^${value}\\b`));
        else if (typeof value === 'boolean') expect(cell, what).toContain(value ? '`on`' : '`off`');
        else if (Array.isArray(value) && value.length === 0) expect(cell, what).toMatch(/empty/);
        else if (typeof value === 'string' && !value.startsWith('/'))
          expect(cell, what).toContain(`\`${value}\``);
      }
    }
  });

  it('is linked from the README, docs/auth.md and docs/relay.md', () => {
    const read = (path: string) =>
      readFileSync(resolve(import.meta.dirname, '../..', path), 'utf8');
    expect(read('README.md')).toContain('(docs/configuration.md)');
    expect(read('docs/auth.md')).toContain('(configuration.md)');
    expect(read('docs/relay.md')).toContain('(configuration.md)');
  });
});
