/**
 * The auth service and the reference route in one process of their own (forked by
 * bench/run.ts; autocannon runs in the orchestrator). `argv[2]` is `sqlite` or `postgres`: a
 * fresh database of that driver (test/helpers/databases.ts). Starts the real auth service with
 * the real clock, signs one device in, and starts a bare express app whose `GET /constant`
 * returns a constant JSON body. Reports both URLs and the device token over IPC.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import { createAuthServer } from '../server/auth/index.ts';
import { createLogger } from '../server/log.ts';
import { testAuthConfig } from '../test/helpers/configs.ts';
import { dbTargets } from '../test/helpers/databases.ts';

export type AuthServerReport =
  | { kind: 'ready'; authUrl: string; bareUrl: string; token: string }
  | { kind: 'skipped'; reason: string };

const driver = process.argv[2] === 'postgres' ? 'postgres' : 'sqlite';
const target = (await dbTargets()).find((t) => t.name === driver);
if (target === undefined || target.skip !== undefined) {
  process.send?.({ kind: 'skipped', reason: target?.skip ?? 'unknown driver' });
  process.exit(0);
}
const dir = mkdtempSync(join(tmpdir(), 'auth-bench-'));
const db = await target.create(dir);
const config = { ...testAuthConfig(dir), db: db.config };
let linkToken = '';
const auth = await createAuthServer({
  config,
  secret: 'bench-auth-secret-0123456789abcdef',
  logger: createLogger('silent'),
  print: (line) => {
    linkToken = line.slice(line.lastIndexOf(' ') + 1);
  },
  sqliteEngine: db.sqliteEngine,
});
await auth.ready;
const authUrl = `http://127.0.0.1:${await auth.listen()}`;
auth.setUrls({ baseUrl: authUrl, relayUrl: 'ws://127.0.0.1:1' });
const sent = await fetch(`${authUrl}/auth/login?email=bench%40example.org`);
if (sent.status !== 200) throw new Error(`login answered ${sent.status}`);
const verified = await fetch(
  `${authUrl}/auth/verify?token=${linkToken}&deviceName=bench&platform=linux`,
);
const { deviceToken } = (await verified.json()) as { deviceToken: string };

const bare = express();
const constant = { device: { id: 1, deviceName: 'bench', platform: 'linux' } };
bare.get('/constant', (_req, res) => {
  res.json(constant);
});
const bareServer: Server = await new Promise((resolve) => {
  const server = bare.listen(0, '127.0.0.1', () => resolve(server));
});
const bareUrl = `http://127.0.0.1:${(bareServer.address() as AddressInfo).port}`;

process.on('message', () => {
  const stop = async () => {
    bareServer.closeAllConnections();
    bareServer.close();
    await auth.close();
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
    process.exit(0);
  };
  stop().catch((err: unknown) => {
    process.stderr.write(`auth bench server: ${String(err)}\n`);
    process.exit(1);
  });
});
process.send?.({ kind: 'ready', authUrl, bareUrl, token: deviceToken } satisfies AuthServerReport);
