// Replaces server/build-kind.ts in the single executable (see build/bundle.ts).
import { dirname } from 'node:path';
import { getAsset } from 'node:sea';
import type { BuildKind } from '../../server/build-kind.ts';

export const buildKind: BuildKind = 'sea';

/** The folder holding the executable (nothing of the program is read from it). */
export const appRoot: string = dirname(process.execPath);

/** A file carried inside the executable (`assets` of build/sea-config), or undefined. */
export function embeddedAsset(name: string): ArrayBuffer | undefined {
  try {
    return getAsset(name);
  } catch {
    return undefined;
  }
}
