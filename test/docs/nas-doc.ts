import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { expect } from 'vitest';

/**
 * The one fenced block of a language (empty: a block without one) in `docs/<file>` whose text
 * includes `marker`, without the indentation of a block inside a list item.
 */
export function docBlock(file: string, language: string, marker: string): string {
  const text = readFileSync(resolve(import.meta.dirname, '../../docs', file), 'utf8');
  // every block in order, whatever its language, so that a closing fence never opens one
  const blocks = [...text.matchAll(/^( *)```(\S*)\n([\s\S]*?)^\1```$/gm)]
    .filter((m) => m[2] === language)
    .map(([, indent = '', , body = '']) =>
      body
        .split('\n')
        .map((line) => (line.startsWith(indent) ? line.slice(indent.length) : line))
        .join('\n'),
    )
    .filter((body) => body.includes(marker));
  expect(blocks, `one \`\`\`${language} block with ${marker} in docs/${file}`).toHaveLength(1);
  return blocks[0] ?? '';
}

/** The one fenced block of a language in docs/nas.md whose text includes `marker`. */
export function nasBlock(language: string, marker: string): string {
  return docBlock('nas.md', language, marker);
}
