import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { expect } from 'vitest';

/** docs/nas.md, whose examples the tests run. */
const nasDoc = readFileSync(resolve(import.meta.dirname, '../../docs/nas.md'), 'utf8');

/** The one fenced block of a language in docs/nas.md whose text includes `marker`. */
export function nasBlock(language: string, marker: string): string {
  const blocks = [...nasDoc.matchAll(new RegExp(`\`\`\`${language}\\n([\\s\\S]*?)\`\`\``, 'g'))]
    .map((m) => m[1] ?? '')
    .filter((text) => text.includes(marker));
  expect(blocks, `one \`\`\`${language} block with ${marker} in docs/nas.md`).toHaveLength(1);
  return blocks[0] ?? '';
}
