// Loads the compiled build (dist/sync-host.cjs) with V8's code cache beside it
// (dist/sync-host.cjs.cache, made by `npm run build`): compiling the 5 MB bundle is most of a
// start (about half of `sync-host --version`), and the cache skips it, as the single executable's
// own code cache does. Node 20 has no compile cache of its own (module.enableCompileCache is 22).
// A cache made by another node, or for another build of the file, is not used: the file is then
// compiled as `require` would. The cache's header is ASCII: the source's first line must be too.
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire, Module } from 'node:module';
import { dirname } from 'node:path';
import vm from 'node:vm';

/**
 * The cache's first line: the node that made it and the build it was made from (the compiled
 * build's own first line, `// sync-host build <hash>`, written by build/bundle.ts). Not the file's
 * size or time: npm gives every file of a package the same time.
 */
function stamp(source) {
  return `sync-host-code-cache ${process.version} ${source.slice(0, source.indexOf('\n'))}\n`;
}

/** The bundle compiled as a CommonJS module's function, with `cachedData` when given. */
function compile(file, source, cachedData) {
  const dynamicImport =
    vm.constants?.USE_MAIN_CONTEXT_DEFAULT_LOADER ?? ((specifier) => import(specifier));
  return new vm.Script(Module.wrap(source), {
    filename: file,
    cachedData,
    importModuleDynamically: dynamicImport,
  });
}

/** Runs the compiled module and returns its exports, as `require(file)` would. */
function run(script, file) {
  const module = new Module(file);
  module.filename = file;
  module.paths = Module._nodeModulePaths(dirname(file));
  module.loaded = true;
  const wrapper = script.runInThisContext();
  wrapper.call(module.exports, module.exports, createRequire(file), module, file, dirname(file));
  return module.exports;
}

/** The cached data for `file` when it was made for this build and this node, else undefined. */
function readCache(file, source) {
  try {
    const cache = readFileSync(`${file}.cache`);
    const header = stamp(source);
    if (cache.subarray(0, header.length).toString('latin1') !== header) return undefined;
    return cache.subarray(header.length);
  } catch {
    return undefined;
  }
}

/** The exports of the compiled build at `file`, compiled from its code cache when it has one. */
export function loadCompiled(file) {
  const source = readFileSync(file, 'utf8');
  const cachedData = readCache(file, source);
  if (cachedData === undefined) return createRequire(import.meta.url)(file);
  return run(compile(file, source, cachedData), file);
}

/** Whether V8 takes `file`'s code cache (compiles only; for the tests). */
export function cacheAccepted(file) {
  const source = readFileSync(file, 'utf8');
  const cachedData = readCache(file, source);
  return cachedData !== undefined && !compile(file, source, cachedData).cachedDataRejected;
}

/**
 * Writes `file`.cache: the code of the bundle's top level and of what its modules ran while
 * loading (run here once, in a process of its own, by `npm run build`).
 */
export function writeCodeCache(file) {
  const source = readFileSync(file, 'utf8');
  const script = compile(file, source, undefined);
  run(script, file);
  // Whole or not at all: a start that reads it meanwhile sees the old cache or the new one.
  const aside = `${file}.cache.${process.pid}.tmp`;
  writeFileSync(aside, Buffer.concat([Buffer.from(stamp(source)), script.createCachedData()]));
  renameSync(aside, `${file}.cache`);
}
