import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '..', '..');
const folders = ['protocol', 'program', 'server', 'client', 'electron', 'renderer', 'build'];

/** Every .ts file under the source folders, relative to the repository root. */
function sourceFiles(): string[] {
  return folders.flatMap((folder) =>
    readdirSync(join(root, folder), { recursive: true, encoding: 'utf8' })
      .filter((file) => file.endsWith('.ts'))
      .map((file) => join(folder, file)),
  );
}

interface Edge {
  from: string;
  to: string;
}

const importPattern =
  /(?:^|\n)\s*(import|export)\s+(type\s+)?[^'"`;]*?from\s+['"](\.[^'"]+)['"]|import\(\s*['"](\.[^'"]+)['"]\s*\)/g;

/** The relative imports (static, re-exports and dynamic) of every source file. */
function importEdges(): Edge[] {
  return sourceFiles().flatMap((from) => {
    const text = readFileSync(join(root, from), 'utf8');
    return [...text.matchAll(importPattern)].map((m) => ({
      from,
      to: relative(root, resolve(root, dirname(from), m[3] ?? m[4] ?? '')),
    }));
  });
}

const under = (folder: string) => (file: string) => file.startsWith(`${folder}/`);

describe('the direction of imports', () => {
  const edges = importEdges();
  const crossing = (from: string, to: string[]) =>
    edges
      .filter((e) => under(from)(e.from) && to.some((t) => under(t)(e.to)))
      .map((e) => `${e.from} → ${e.to}`);

  it('finds the imports it checks', () => {
    expect(edges.some((e) => e.from === 'program/main.ts' && e.to === 'server/host.ts')).toBe(true);
  });

  it('keeps protocol/ free of both sides', () => {
    expect(crossing('protocol', ['server', 'client', 'program', 'electron', 'build'])).toEqual([]);
  });

  it('never imports the server from the client or the client from the server', () => {
    expect(crossing('client', ['server', 'program', 'build'])).toEqual([]);
    expect(crossing('server', ['client', 'program', 'build', 'electron'])).toEqual([]);
  });

  it('keeps the document store free of the relay that serves it', () => {
    expect(crossing('server/store', ['server/relay'])).toEqual([]);
  });

  it('keeps the folder engine below the commands that run it', () => {
    expect(crossing('client/folder', ['client/cli'])).toEqual([]);
  });

  it('keeps the database layer below the auth service', () => {
    expect(crossing('server/db', ['server/auth', 'server/relay', 'server/admin'])).toEqual([]);
  });

  it('has no import cycle, not even through type-only imports', () => {
    const next = new Map<string, string[]>();
    for (const e of edges) {
      next.set(e.from, [...(next.get(e.from) ?? []), e.to]);
    }
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const visit = (file: string, path: string[]): void => {
      if (state.get(file) === 'done') return;
      if (state.get(file) === 'open') {
        cycles.push([...path.slice(path.indexOf(file)), file].join(' → '));
        return;
      }
      state.set(file, 'open');
      for (const to of next.get(file) ?? []) visit(to, [...path, file]);
      state.set(file, 'done');
    };
    for (const file of next.keys()) visit(file, []);
    expect(cycles).toEqual([]);
  });
});
