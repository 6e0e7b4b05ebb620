import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createCliRunner } from '../helpers/cli-process.ts';
import { writeConf } from '../helpers/configs.ts';
import { dbTargets } from '../helpers/databases.ts';
import { freePort } from '../helpers/ports.ts';
import { processScope } from '../helpers/process-scope.ts';
import { nasBlock } from './nas-doc.ts';

const docName = 'sync_host';

/** The doc's line of a ```text block that includes `marker`, with the doc's names replaced. */
function errorLine(marker: string, name: string): string {
  const line = nasBlock('text', marker)
    .split('\n')
    .find((l) => l.includes(marker));
  expect(line, `a line with ${marker} in docs/nas.md`).toBeDefined();
  return (line ?? '').split(docName).join(name);
}

/** The doc's auth.conf lines of a database as key → value. */
function iniBlock(marker: string): Record<string, string> {
  const entries = nasBlock('ini', marker)
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]);
  return Object.fromEntries(entries);
}

const targets = await dbTargets();
const skipOf = (name: string) => targets.find((t) => t.name === name)?.skip;
const freshName = () => `synchost_${process.pid}_${randomBytes(4).toString('hex')}`;
const scope = processScope('synchost-nas-db-');
const cli = createCliRunner();
afterAll(() => cli.killAll());

/**
 * A config folder with the doc's database lines for user and database `name` (password
 * `password`), and what the test host needs besides: loopback, ephemeral ports, no mDNS.
 */
async function configFor(marker: string, name: string, password: string): Promise<string> {
  const dir = scope.tempDir();
  const port = await freePort();
  const fromDoc = iniBlock(marker);
  expect(fromDoc.DB_USER).toBe(docName);
  expect(fromDoc.DB_NAME).toBe(docName);
  writeConf(dir, 'auth.conf', {
    ...fromDoc,
    DB_USER: name,
    DB_NAME: name,
    DB_PASS: password,
    AUTH_SECRET: randomBytes(32).toString('hex'),
    AUTH_BASE_URL: `http://127.0.0.1:${port}`,
    PORT: port,
    BIND: '127.0.0.1',
    MDNS: 'off',
    TLS: 'off',
  });
  writeConf(dir, 'relay.conf', { 'ws.port': 0, 'status.port': 0 });
  return dir;
}

/**
 * The host refuses to start: exit 2 with `line` among its stderr lines, up to the database
 * server's own words in brackets (MariaDB adds `(using password: YES)` on some connections only).
 */
async function refusesWith(dir: string, line: string) {
  const res = await cli.cli(['--headless', '--config-dir', dir], dir);
  const ours = line.slice(0, line.indexOf(' (') === -1 ? undefined : line.indexOf(' ('));
  expect(
    res.stderr.split('\n').some((l) => l.startsWith(ours)),
    `${res.stderr} has no line starting ${ours}`,
  ).toBe(true);
  expect(res.code).toBe(2);
}

/** The host starts, answers /health with 200, and stops cleanly. */
async function startsAndAnswers(dir: string) {
  const host = await scope.start(['--headless'], dir);
  const auth = await host.url('auth');
  const health = await fetch(`${auth}/health`);
  expect(health.status).toBe(200);
  expect(await host.stop('SIGTERM')).toBe(0);
}

const pgTools = spawnSync('createuser', ['--version']).status === 0;
const pgSkip = skipOf('postgres') ?? (pgTools ? undefined : 'createuser/createdb not installed');

describe.skipIf(pgSkip !== undefined)(
  `docs/nas.md: PostgreSQL user and database${pgSkip ? ` (skipped: ${pgSkip})` : ''}`,
  () => {
    const name = freshName();
    const password = randomBytes(12).toString('hex');
    afterAll(async () => {
      const client = new pg.Client({ host: '127.0.0.1', user: 'postgres', database: 'postgres' });
      await client.connect();
      try {
        await client.query(`drop database if exists ${name} with (force)`);
        await client.query(`drop role if exists ${name}`);
      } finally {
        await client.end();
      }
    });

    /** One of the doc's `sudo -u postgres …` lines, run as postgres over 127.0.0.1. */
    function runDocLine(command: string) {
      const line = nasBlock('sh', 'createuser')
        .split('\n')
        .find((l) => l.includes(` ${command} `));
      const prefix = 'sudo -u postgres ';
      expect(line?.startsWith(prefix), `a "${prefix}${command}" line`).toBe(true);
      const [tool = '', ...args] = (line ?? '').slice(prefix.length).trim().split(/\s+/);
      // setsid: no terminal, so --pwprompt reads the password twice from stdin.
      const res = spawnSync(
        'setsid',
        [
          '-w',
          tool,
          '-h',
          '127.0.0.1',
          '-U',
          'postgres',
          ...args.map((a) => a.split(docName).join(name)),
        ],
        { input: `${password}\n${password}\n`, encoding: 'utf8', timeout: 20_000 },
      );
      expect(res.stderr.replace(/Enter (password for new role|it again): /g, '').trim()).toBe('');
      expect(res.status).toBe(0);
    }

    it('without the role the host exits 2 with the line the doc shows', async () => {
      await refusesWith(
        await configFor('DB_DRIVER=postgres', name, password),
        errorLine('postgres at 127.0.0.1:5432 refused', name),
      );
    });

    it('after createuser alone, the line the doc shows for the missing database', async () => {
      runDocLine('createuser');
      await refusesWith(
        await configFor('DB_DRIVER=postgres', name, password),
        errorLine('has no database', name),
      );
    });

    it('after createdb the host starts on it with the doc auth.conf lines', async () => {
      runDocLine('createdb');
      await startsAndAnswers(await configFor('DB_DRIVER=postgres', name, password));
    });
  },
);

const mySkip = skipOf('mysql');

describe.skipIf(mySkip !== undefined)(
  `docs/nas.md: MariaDB user and database${mySkip ? ` (skipped: ${mySkip})` : ''}`,
  () => {
    const name = freshName();
    const password = randomBytes(12).toString('hex');
    const root = () =>
      mysql.createConnection({ host: '127.0.0.1', user: 'root', multipleStatements: true });
    afterAll(async () => {
      const conn = await root();
      try {
        await conn.query(`drop user if exists '${name}'@'127.0.0.1'`);
        await conn.query(`drop database if exists ${name}`);
      } finally {
        await conn.end();
      }
    });

    it('without the user the host exits 2 with the line the doc shows', async () => {
      await refusesWith(
        await configFor('DB_DRIVER=mariadb', name, password),
        errorLine('mysql at', name),
      );
    });

    it("after the doc's SQL the host starts on it with the doc auth.conf lines", async () => {
      const sql = nasBlock('sql', 'CREATE USER')
        .split(docName)
        .join(name)
        .split("'change-me'")
        .join(`'${password}'`);
      expect(iniBlock('DB_DRIVER=mariadb').DB_PASS).toBe('change-me');
      const conn = await root();
      try {
        await conn.query(sql);
      } finally {
        await conn.end();
      }
      await startsAndAnswers(await configFor('DB_DRIVER=mariadb', name, password));
    });
  },
);
