// Replaces server/db/better-sqlite3.ts in the single executable (see build/bundle.ts): the
// package's JavaScript is bundled, its compiled addon is carried as an asset and loaded from a
// private temporary folder (removed once loaded: the mapping stays valid).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getAsset } from 'node:sea';
import BetterSqlite3 from 'better-sqlite3';

let addon: object | undefined;

function loadAddon(): object {
  const dir = mkdtempSync(join(tmpdir(), 'sync-host-sqlite-'));
  const file = join(dir, 'better_sqlite3.node');
  try {
    writeFileSync(file, Buffer.from(getAsset('better_sqlite3.node')), { mode: 0o700 });
    const module = { exports: {} };
    process.dlopen(module, file);
    return module.exports;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** better-sqlite3 with the addon carried inside the executable (loaded at the first open). */
export function requireBetterSqlite3(): typeof BetterSqlite3 {
  // Called with `new` (a function returning an object: `new` gives that object).
  function open(path: string, options: BetterSqlite3.Options = {}) {
    addon ??= loadAddon();
    return new BetterSqlite3(path, { ...options, nativeBinding: addon as unknown as string });
  }
  return open as unknown as typeof BetterSqlite3;
}

/** sql.js's WebAssembly, carried inside the executable. */
export function sqlJsOptions(): { wasmBinary: ArrayBuffer } {
  return { wasmBinary: getAsset('sql-wasm.wasm') };
}
