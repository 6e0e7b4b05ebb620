import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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
/** npm without optional packages (better-sqlite3 would compile from source here) or audits. */
const npmEnv = {
  ...process.env,
  npm_config_omit: 'optional',
  npm_config_audit: 'false',
  npm_config_fund: 'false',
  npm_config_update_notifier: 'false',
};

// One build for the file: the package's folder as a checkout has it after `npm run build`, with
// a user's conf files, data and tests lying around, packed once.
let temp: string;
let tarball: string;
let packed: string[];
beforeAll(async () => {
  temp = mkdtempSync(join(tmpdir(), 'sync-host-pack-'));
  const checkout = join(temp, 'checkout');
  for (const part of ['package.json', 'README.md', 'bin', 'client', 'protocol', 'docs']) {
    cpSync(join(root, part), join(checkout, part), { recursive: true });
  }
  await buildDist(join(checkout, 'dist'), root);
  writeFileSync(join(checkout, 'auth.conf'), 'SMTP_PASS=secret\n');
  writeFileSync(join(checkout, 'relay.conf'), 'auth.secret=secret\n');
  mkdirSync(join(checkout, 'data'));
  writeFileSync(join(checkout, 'data', 'secret'), 'secret\n');
  mkdirSync(join(checkout, 'test'));
  writeFileSync(join(checkout, 'test', 'a.test.ts'), '\n');
  const { stdout } = await run(
    'npm',
    ['pack', '--json', '--ignore-scripts', '--pack-destination', temp],
    { cwd: checkout, env: npmEnv },
  );
  const [result] = JSON.parse(stdout) as Array<{
    filename: string;
    files: Array<{ path: string }>;
  }>;
  if (result === undefined) throw new Error('npm pack made nothing');
  tarball = join(temp, result.filename);
  packed = result.files.map((file) => file.path);
}, 300_000);
afterAll(() => rmSync(temp, { recursive: true, force: true }));

describe('the npm package (npm pack)', () => {
  it('holds the launcher, the compiled build and the client library, and no conf, data or test', () => {
    expect(packed).toEqual(
      expect.arrayContaining([
        'bin/sync-host',
        'bin/load-compiled.js',
        'dist/sync-host.cjs',
        'dist/sync-host.cjs.cache',
        'dist/sql-wasm.wasm',
        'dist/renderer/app.js',
        'client/index.ts',
        'package.json',
        'README.md',
      ]),
    );
    const forbidden = packed.filter((path) =>
      /(^|\/)(test|bench|data|node_modules)\/|\.conf$|^(server|cli|scripts)\//.test(path),
    );
    expect(forbidden).toEqual([]);
  });

  it('installs with npm install -g without engine warnings and runs from any folder', async () => {
    const prefix = join(temp, 'prefix');
    const install = await run(
      'npm',
      ['install', '--global', '--prefix', prefix, tarball, '--loglevel', 'warn'],
      { cwd: temp, env: npmEnv, maxBuffer: 1 << 24 },
    );
    expect(`${install.stdout}${install.stderr}`).not.toMatch(/EBADENGINE/);
    const elsewhere = mkdtempSync(join(tmpdir(), 'sync-host-elsewhere-'));
    try {
      const { stdout } = await run(join(prefix, 'bin', 'sync-host'), ['--version'], {
        cwd: elsewhere,
      });
      expect(stdout).toBe(`${version}\n`);
    } finally {
      rmSync(elsewhere, { recursive: true, force: true });
    }
    // The installed build takes its code cache (npm gave its files another time).
    const installed = join(prefix, 'lib', 'node_modules', 'sync-host');
    const loader = pathToFileURL(join(installed, 'bin', 'load-compiled.js')).href;
    const compiled = join(installed, 'dist', 'sync-host.cjs');
    const check = `import { cacheAccepted } from ${JSON.stringify(loader)}; console.log(cacheAccepted(${JSON.stringify(compiled)}));`;
    const accepted = await run(process.execPath, ['--input-type=module', '-e', check]);
    expect(accepted.stdout.trim()).toBe('true');
    const dir = hostDir();
    const host = await startHostProcess(['--headless'], dir, {
      launcher: join(prefix, 'lib', 'node_modules', 'sync-host', 'bin', 'sync-host'),
    });
    try {
      expect((await fetch(`${await host.url('auth')}/health`)).status).toBe(200);
    } finally {
      expect(await host.stop('SIGTERM')).toBe(0);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000);

  it('runs with npx from the tarball', async () => {
    const elsewhere = mkdtempSync(join(tmpdir(), 'sync-host-npx-'));
    try {
      const { stdout } = await run(
        'npx',
        ['--yes', `--package=${tarball}`, 'sync-host', '--version'],
        { cwd: elsewhere, env: npmEnv, maxBuffer: 1 << 24 },
      );
      expect(stdout.trim().split('\n').at(-1)).toBe(version);
    } finally {
      rmSync(elsewhere, { recursive: true, force: true });
    }
  }, 300_000);
});
