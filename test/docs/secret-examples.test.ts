import { readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { weakSecretProblem } from '../../server/config/secret-strength.ts';

const root = resolve(import.meta.dirname, '../..');
const docs = [
  'README.md',
  ...readdirSync(resolve(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];

/** Every value the docs set a shared secret to (`AUTH_SECRET=…`, `auth.secret=…`), with its file. */
function secretExamples(): Array<[string, string]> {
  const found: Array<[string, string]> = [];
  for (const path of docs) {
    const text = readFileSync(resolve(root, path), 'utf8');
    for (const match of text.matchAll(
      /(?:AUTH_SECRET|auth\.secret)=([^\s`|]*(?: [^\s#`|][^`|\n]*?)?)(?=`|\s+#|\s*\||\n|$)/g,
    )) {
      const value = (match[1] ?? '').trim();
      if (value !== '' && !value.startsWith('$')) found.push([path, value]);
    }
  }
  return found;
}

describe('the shared secrets the docs show', () => {
  it('cannot be pasted as they are: each is refused at start', () => {
    const examples = secretExamples();
    expect(examples.map(([, value]) => value)).toContain('<output of openssl rand -hex 32>');
    for (const [path, value] of examples) {
      expect(weakSecretProblem(value), `${path}: ${value}`).toBeDefined();
    }
  });
});
