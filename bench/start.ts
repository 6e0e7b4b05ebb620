// `npm run bench:start`: from start to /health answering 200, and the time of command-line
// commands that stop before any network call, for the single executable (dist/sync-host),
// bin/sync-host on the compiled build, and the TypeScript sources through tsx; median of 10
// runs each, against node starting a bare HTTP server (the floor).
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { buildDist } from '../build/bundle.ts';
import { repoRoot } from '../build/electron-bundle.ts';
import { buildExecutable } from '../build/sea.ts';

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

/** Milliseconds from spawning `command` to its first 200 on /health of the printed auth URL. */
async function startToHealth(command: string, args: string[], cwd: string): Promise<number> {
  const started = performance.now();
  const child = spawn(command, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    const url = await authUrl(child);
    for (;;) {
      const res = await fetch(`${url}/health`).catch(() => undefined);
      if (res?.status === 200) return performance.now() - started;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
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

async function measure(sample: () => Promise<number>): Promise<string> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) times.push(await sample());
  return `${Math.round(median(times))} ms`;
}

// Built from the sources as they are: bin/sync-host takes the compiled build only when current.
await buildDist();
await buildExecutable();

const dir = mkdtempSync(join(tmpdir(), 'sync-host-bench-start-'));
writeFileSync(
  join(dir, 'auth.conf'),
  `PORT=0\nBIND=127.0.0.1\nMDNS=off\nDATA_DIR=${join(dir, 'data')}\n`,
);
writeFileSync(join(dir, 'relay.conf'), 'ws.port=0\nstatus.port=0\n');
home = join(dir, 'home');
mkdirSync(home);
const headless = ['--headless', '--config-dir', dir];
// Run from the repository (the tsx variant resolves tsx from there); the data is in `dir`.
const cwd = repoRoot;
// The data folder is made once, before the timed starts.
await startToHealth(process.execPath, [launcher, ...headless], cwd);

const commands: Array<[string, string[]]> = [
  ['--version', ['--version']],
  ['config check', ['config', 'check', '--config-dir', dir]],
  ['projects (not signed in)', ['projects']],
];
const rows = [
  `| program | start → /health | ${commands.map(([name]) => name).join(' | ')} |`,
  `|---|---|${commands.map(() => '---').join('|')}|`,
];
rows.push(
  `| node, bare HTTP server (floor) | ${await measure(() => startToHealth(process.execPath, ['-e', floorServer], cwd))} | ${await measure(() => commandTime(process.execPath, ['-e', ''], cwd))} | | |`,
);
for (const [name, argsOf] of Object.entries(variants)) {
  const [command, args] = argsOf(headless);
  const cells = [await measure(() => startToHealth(command, args, cwd))];
  for (const [, commandArgs] of commands) {
    const [cmd, full] = argsOf(commandArgs);
    cells.push(await measure(() => commandTime(cmd, full, cwd)));
  }
  rows.push(`| ${name} | ${cells.join(' | ')} |`);
}
rmSync(dir, { recursive: true, force: true });
process.stdout.write(`Median of ${runs} runs (node ${process.version}):\n\n${rows.join('\n')}\n`);
