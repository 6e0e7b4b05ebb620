import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { eventually, withDeadline } from './wait.ts';

/** Debian's nginx (apt-get install nginx); NGINX_PATH overrides. */
export const nginxPath = process.env.NGINX_PATH ?? '/usr/sbin/nginx';

/**
 * Why the nginx tests cannot run here, or undefined when they can. With REQUIRE_NGINX=1 (set by
 * CI) a missing nginx or openssl is a failure instead of a skip.
 */
export function nginxSkipReason(): string | undefined {
  let why: string | undefined;
  if (!existsSync(nginxPath)) why = `${nginxPath} not found; install Debian's nginx`;
  else if (spawnSync('openssl', ['version']).status !== 0) why = 'openssl not found on the PATH';
  if (why !== undefined && process.env.REQUIRE_NGINX === '1')
    throw new Error(`REQUIRE_NGINX=1 but ${why}`);
  return why;
}

/** A self-signed certificate for `name` (also its subjectAltName) in `dir`: cert.pem, key.pem. */
export function selfSignedCertificate(dir: string, name: string): { cert: string; key: string } {
  const cert = join(dir, 'cert.pem');
  const key = join(dir, 'key.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '1',
      '-subj',
      `/CN=${name}`,
      '-addext',
      `subjectAltName=DNS:${name}`,
      '-keyout',
      key,
      '-out',
      cert,
    ],
    { stdio: 'ignore' },
  );
  return { cert, key };
}

/**
 * A whole nginx.conf around `http` (the contents of an `http { }` block, as a conf.d file is):
 * one foreground process (no master, no daemon) whose pid file, logs and temp folders are in
 * `prefix`, so it needs nothing of the system's nginx setup.
 */
export function nginxConf(prefix: string, http: string): string {
  for (const temp of ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'])
    mkdirSync(join(prefix, temp), { recursive: true });
  return [
    'daemon off;',
    'master_process off;',
    `pid ${join(prefix, 'nginx.pid')};`,
    `error_log ${join(prefix, 'error.log')} info;`,
    'events { worker_connections 64; }',
    'http {',
    `  access_log ${join(prefix, 'access.log')};`,
    ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map(
      (temp) => `  ${temp}_temp_path ${join(prefix, temp)};`,
    ),
    http,
    '}',
    '',
  ].join('\n');
}

/** `nginx -t` of a config: its exit code and output (nginx writes the verdict on stderr). */
export function nginxTest(prefix: string, conf: string): { status: number | null; output: string } {
  const file = join(prefix, 'nginx.conf');
  writeFileSync(file, conf);
  const run = spawnSync(
    nginxPath,
    ['-t', '-p', `${prefix}/`, '-e', join(prefix, 'error.log'), '-c', file],
    { encoding: 'utf8' },
  );
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

/** A running nginx of a test; `stop()` ends it by its pid. */
export interface NginxProcess {
  child: ChildProcess;
  stop(): Promise<void>;
}

/** Starts nginx on `prefix/nginx.conf` (written by nginxTest) and waits until `port` accepts. */
export async function startNginx(prefix: string, port: number): Promise<NginxProcess> {
  const child = spawn(
    nginxPath,
    ['-p', `${prefix}/`, '-e', join(prefix, 'error.log'), '-c', join(prefix, 'nginx.conf')],
    { stdio: 'ignore' },
  );
  const exited = once(child, 'exit');
  const accepts = () =>
    new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
  await eventually(
    async () => {
      if (child.exitCode !== null) throw new Error(`nginx exited with ${child.exitCode}`);
      return accepts();
    },
    `nginx listening on ${port}`,
    10_000,
  );
  return {
    child,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      if (child.pid !== undefined) process.kill(child.pid, 'SIGTERM');
      await withDeadline(exited, 5_000, 'nginx did not stop within 5 s of SIGTERM');
    },
  };
}
