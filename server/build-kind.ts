import { fileURLToPath } from 'node:url';

/**
 * How this copy of the program runs: `source` from the TypeScript sources through tsx (a
 * development checkout), `dist` from the compiled build (`npm run build`), `sea` as the single
 * executable (`npm run build:bin`). The build replaces this module (build/bundle.ts): the
 * compiled copies never rebuild the admin UI at start, and the executable reads its files from
 * inside itself.
 */
export type BuildKind = 'source' | 'dist' | 'sea';

export const buildKind: BuildKind = 'source';

/**
 * Root of the repository or installed package (package.json, bin/, dist/). This module and the
 * compiled bundle both sit one folder below it.
 */
export const appRoot: string = fileURLToPath(new URL('..', import.meta.url));

/** A file carried inside the single executable (admin UI, SQLite engines); undefined elsewhere. */
export function embeddedAsset(_name: string): ArrayBuffer | undefined {
  return undefined;
}
