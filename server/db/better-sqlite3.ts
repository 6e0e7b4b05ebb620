import { createRequire } from 'node:module';
import type BetterSqlite3 from 'better-sqlite3';
import { embeddedAsset } from '../build-kind.ts';

const require = createRequire(import.meta.url);

/**
 * better-sqlite3's constructor. It is an optional dependency: this throws MODULE_NOT_FOUND when
 * it is not installed, and opening a database throws when its addon cannot load here. The single
 * executable carries its own copy (build/sea/better-sqlite3.ts replaces this module there).
 */
export function requireBetterSqlite3(): typeof BetterSqlite3 {
  return require('better-sqlite3') as typeof BetterSqlite3;
}

/**
 * Options for sql.js's `initSqlJs`: the WebAssembly file carried inside the single executable,
 * or none (sql.js finds `sql-wasm.wasm` beside its own script, in node_modules or in dist/).
 */
export function sqlJsOptions(): { wasmBinary: ArrayBuffer } | undefined {
  const wasmBinary = embeddedAsset('sql-wasm.wasm');
  return wasmBinary === undefined ? undefined : { wasmBinary };
}
