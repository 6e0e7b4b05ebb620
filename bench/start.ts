// `npm run bench:start`: from start to /health answering 200, and the time of command-line
// commands that stop before any network call, for the single executable (dist/sync-host),
// bin/sync-host on the compiled build, and the TypeScript sources through tsx, with the
// all-in-one host's default TLS (and bin/sync-host with TLS=off); median of 10 runs each, taken
// in turns, against node starting a bare HTTP and a bare HTTPS server (the floors).
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { get as httpGet } from 'node:http';
import { get as httpsGet } from 'node:https';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { buildDist } from '../build/bundle.ts';
import { repoRoot } from '../build/electron-bundle.ts';
import { buildExecutable } from '../build/sea.ts';
import { selfSignedPaths } from '../server/tls/certificate.ts';

const runs = Number(process.env.BENCH_RUNS ?? 10);
const launcher = join(repoRoot, 'bin', 'sync-host');
const executable = join(repoRoot, 'dist', 'sync-host');
const tsxMain = `import { register } from 'tsx/esm/api'; register(); const { main } = await import(${JSON.stringify(pathToFileURL(join(repoRoot, 'program', 'main.ts')).href)}); process.exitCode = await main(process.argv.slice(1));`;

/** How each variant is started: command and the arguments before the program's own. */
const variants: Record<string, (args: string[]) => [string, string[]]> = {
  'dist/sync-host (executable)': (args) => [executable, args],
  'bin/sync-host (compiled build)': (args) => [process.execPath, [launcher, ...args]],
  'tsx (TypeScript sources)': (args) => [
    process.execPath,
    ['--input-type=module', '-e', tsxMain, '--', ...args],
  ],
};

const floorServer =
  "require('node:http').createServer((q, s) => s.end('ok')).listen(0, '127.0.0.1', function () { console.log('auth:   http://127.0.0.1:' + this.address().port); });";

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/**
 * The status of GET `url`, or undefined when nothing answers. An https:// host (the all-in-one
 * host's default, TLS=self-signed) is asked without checking its certificate: the start is timed,
 * not the trust.
 */
function healthStatus(url: string): Promise<number | undefined> {
  return new Promise((resolve) => {
    const options = { agent: false, rejectUnauthorized: false } as const;
    const request = (url.startsWith('https:') ? httpsGet : httpGet)(url, options, (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    request.once('error', () => resolve(undefined));
  });
}

/** Milliseconds from spawning `command` to its first 200 on /health of the printed auth URL. */
async function startToHealth(command: string, args: string[], cwd: string): Promise<number> {
  const started = performance.now();
  const child = spawn(command, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    const url = await authUrl(child);
    const until = started + 60_000;
    while (performance.now() < until) {
      if ((await healthStatus(`${url}/health`)) === 200) return performance.now() - started;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    throw new Error(`${command} ${args.join(' ')}: no 200 on ${url}/health within 60 s`);
  } finally {
    child.kill('SIGTERM');
    if (child.exitCode === null) await once(child, 'exit');
  }
}

function authUrl(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    let errors = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      errors += chunk.toString();
    });
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /^auth: +(\S+)$/m.exec(out);
      if (match?.[1] !== undefined) resolve(match[1]);
    });
    child.once('exit', (code) =>
      reject(new Error(`exited with ${code} before printing its URLs: ${errors.trim()}`)),
    );
  });
}

/** The HOME of the timed commands: no credentials, so `projects` stops before the network. */
let home = '';

/** Milliseconds from spawning a command to its exit. */
async function commandTime(command: string, args: string[], cwd: string): Promise<number> {
  const started = performance.now();
  const child = spawn(command, args, { cwd, stdio: 'ignore', env: { ...process.env, HOME: home } });
  await once(child, 'exit');
  return performance.now() - started;
}

/** The rows of the table, each a list of samples per column, taken in turns (see below). */
type Samplers = Array<{ row: string; cells: Array<(() => Promise<number>) | undefined> }>;

/**
 * Runs every sampler once per round, row after row, `runs` rounds: on a machine shared with
 * other work, a change in its load hits every row alike. Returns the table's rows of medians.
 */
async function measureInTurns(samplers: Samplers, columns: number): Promise<string[]> {
  const times = samplers.map(({ cells }) => cells.map((): number[] => []));
  for (let round = 1; round <= runs; round++) {
    process.stderr.write(`round ${round}/${runs}\n`);
    for (const [r, { cells }] of samplers.entries()) {
      for (const [c, sample] of cells.entries()) {
        if (sample !== undefined) times[r]?.[c]?.push(await sample());
      }
    }
  }
  return samplers.map(({ row }, r) => {
    const medians = Array.from({ length: columns }, (_, c) => {
      const taken = times[r]?.[c] ?? [];
      return taken.length === 0 ? '' : `${Math.round(median(taken))} ms`;
    });
    return `| ${row} | ${medians.join(' | ')} |`;
  });
}

/** A config folder for the timed starts: loopback, ephemeral ports, mDNS off, TLS as given. */
function configDir(tls: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'sync-host-bench-start-'));
  writeFileSync(
    join(dir, 'auth.conf'),
    `PORT=0\nBIND=127.0.0.1\nMDNS=off\nTLS=${tls}\nDATA_DIR=${join(dir, 'data')}\n`,
  );
  writeFileSync(join(dir, 'relay.conf'), 'ws.port=0\nstatus.port=0\n');
  return dir;
}

// Built from the sources as they are: bin/sync-host takes the compiled build only when current.
await buildDist();
await buildExecutable();

// The all-in-one host's default (a self-signed certificate, HTTPS and WSS), and TLS=off.
const dir = configDir('self-signed');
const plainDir = configDir('off');
home = join(dir, 'home');
mkdirSync(home);
const headless = ['--headless', '--config-dir', dir];
// Run from the repository (the tsx variant resolves tsx from there); the data is in `dir`.
const cwd = repoRoot;
// The data folders (and the certificate) are made once, before the timed starts.
await startToHealth(process.execPath, [launcher, ...headless], cwd);
await startToHealth(process.execPath, [launcher, '--headless', '--config-dir', plainDir], cwd);
const { cert, key } = selfSignedPaths(join(dir, 'data'));
const floorHttps = `const fs = require('node:fs'); require('node:https').createServer({ cert: fs.readFileSync(${JSON.stringify(cert)}), key: fs.readFileSync(${JSON.stringify(key)}) }, (q, s) => s.end('ok')).listen(0, '127.0.0.1', function () { console.log('auth:   https://127.0.0.1:' + this.address().port); });`;

const commands: Array<[string, string[]]> = [
  ['--version', ['--version']],
  ['config check', ['config', 'check', '--config-dir', dir]],
  ['projects (not signed in)', ['projects']],
];
const node = process.execPath;
const samplers: Samplers = [
  {
    row: "node, bare HTTP server (floor); `node -e ''`",
    cells: [
      () => startToHealth(node, ['-e', floorServer], cwd),
      () => commandTime(node, ['-e', ''], cwd),
    ],
  },
  {
    row: 'node, bare HTTPS server, same certificate (floor)',
    cells: [() => startToHealth(node, ['-e', floorHttps], cwd)],
  },
];
for (const [name, argsOf] of Object.entries(variants)) {
  const [command, args] = argsOf(headless);
  samplers.push({
    row: name,
    cells: [
      () => startToHealth(command, args, cwd),
      ...commands.map(([, commandArgs]) => {
        const [cmd, full] = argsOf(commandArgs);
        return () => commandTime(cmd, full, cwd);
      }),
    ],
  });
}
const [plainCommand, plainArgs] = variants['bin/sync-host (compiled build)']?.([
  '--headless',
  '--config-dir',
  plainDir,
]) ?? [node, []];
samplers.push({
  row: 'bin/sync-host (compiled build), TLS=off',
  cells: [() => startToHealth(plainCommand, plainArgs, cwd)],
});
const rows = [
  `| program (TLS=self-signed unless said) | start → /health | ${commands.map(([name]) => name).join(' | ')} |`,
  `|---|---|${commands.map(() => '---').join('|')}|`,
  ...(await measureInTurns(samplers, 1 + commands.length)),
];
for (const folder of [dir, plainDir]) rmSync(folder, { recursive: true, force: true });
process.stdout.write(
  `Median of ${runs} runs, taken in turns (node ${process.version}, load average ${loadavg()
    .map((n) => n.toFixed(1))
    .join(' ')} at the end):\n\n${rows.join('\n')}\n`,
);
