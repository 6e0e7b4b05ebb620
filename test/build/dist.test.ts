import { execFile } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDist } from '../../build/bundle.ts';
import { hostDir, startHostProcess } from '../helpers/host-process.ts';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../..');
const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  version: string;
};

// One build for the file: a copy of the package as npm installs it (bin/, dist/, node_modules),
// without the TypeScript sources.
let tree: string;
beforeAll(async () => {
  tree = mkdtempSync(join(tmpdir(), 'sync-host-dist-'));
  await buildDist(join(tree, 'dist'));
  cpSync(join(root, 'bin'), join(tree, 'bin'), { recursive: true });
  cpSync(join(root, 'package.json'), join(tree, 'package.json'));
  symlinkSync(join(root, 'node_modules'), join(tree, 'node_modules'));
}, 120_000);
afterAll(() => rmSync(tree, { recursive: true, force: true }));

describe('the compiled build (npm run build)', () => {
  it('runs --version from dist/ with no source file beside it', async () => {
    expect(existsSync(join(tree, 'program'))).toBe(false);
    const { stdout } = await run(process.execPath, [join(tree, 'bin', 'sync-host'), '--version']);
    expect(stdout).toBe(`${version}\n`);
  });

  it('loads the compiled build from its code cache, and compiles it when the cache is not for it', async () => {
    const compiled = join(tree, 'dist', 'sync-host.cjs');
    const accepted = async () => {
      const loader = pathToFileURL(join(tree, 'bin', 'load-compiled.js')).href;
      const script = `import { cacheAccepted } from ${JSON.stringify(loader)}; console.log(cacheAccepted(${JSON.stringify(compiled)}));`;
      return (await run(process.execPath, ['--input-type=module', '-e', script])).stdout.trim();
    };
    const versionShown = async () =>
      (await run(process.execPath, [join(tree, 'bin', 'sync-host'), '--version'])).stdout;
    expect(await accepted()).toBe('true');
    // A cache V8 refuses (damaged): compiled from the source.
    const cache = readFileSync(`${compiled}.cache`);
    const header = cache.indexOf(0x0a) + 1;
    writeFileSync(
      `${compiled}.cache`,
      Buffer.concat([cache.subarray(0, header), Buffer.alloc(64, 7)]),
    );
    expect(await accepted()).toBe('false');
    expect(await versionShown()).toBe(`${version}\n`);
    writeFileSync(`${compiled}.cache`, cache);
    expect(await accepted()).toBe('true');
    // The file's time does not matter (npm gives every file of a package one time)...
    utimesSync(compiled, new Date(499_162_500_000), new Date(499_162_500_000));
    expect(await accepted()).toBe('true');
    // ...the build does: another build's first line, and the cache is not used.
    const source = readFileSync(compiled, 'utf8');
    expect(source).toMatch(/^\/\/ sync-host build [0-9a-f]{32}\n/);
    writeFileSync(compiled, source.replace(/^(\/\/ sync-host build )[0-9a-f]/, '$1x'));
    expect(await accepted()).toBe('false');
    expect(await versionShown()).toBe(`${version}\n`);
  });

  it('starts the headless host and serves the admin UI bundled at build time', async () => {
    const dir = hostDir();
    const host = await startHostProcess(['--headless'], dir, {
      launcher: join(tree, 'bin', 'sync-host'),
    });
    try {
      const auth = await host.url('auth');
      expect((await fetch(`${auth}/health`)).status).toBe(200);
      const app = await fetch(`${auth}/admin/app.js`);
      expect(app.status).toBe(200);
      expect(await app.text()).toBe(readFileSync(join(tree, 'dist', 'renderer', 'app.js'), 'utf8'));
      // The native SQLite module loads from node_modules beside the build (no sql.js fallback).
      expect(host.stderr.join('\n')).not.toMatch(/sql\.js/);
    } finally {
      expect(await host.stop('SIGTERM')).toBe(0);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('bin/sync-host runs the sources through tsx when one is newer than the build', async () => {
    const launcher = join(tree, 'bin', 'sync-host');
    // A development checkout: server/ and program/ beside the build.
    mkdirSync(join(tree, 'server'));
    mkdirSync(join(tree, 'program'));
    const entry = join(tree, 'program', 'main.ts');
    writeFileSync(
      entry,
      "export async function main(): Promise<number> { process.stdout.write('from the sources\\n'); return 0; }\n",
    );
    try {
      const fromSources = await run(process.execPath, [launcher, '--version']);
      expect(fromSources.stdout).toBe('from the sources\n');
      // The same source, older than the build: the build is current again.
      const past = new Date(Date.now() - 86_400_000);
      utimesSync(entry, past, past);
      utimesSync(join(tree, 'program'), past, past);
      const fromBuild = await run(process.execPath, [launcher, '--version']);
      expect(fromBuild.stdout).toBe(`${version}\n`);
    } finally {
      for (const folder of ['program', 'server']) {
        rmSync(join(tree, folder), { recursive: true, force: true });
      }
    }
  });
});
