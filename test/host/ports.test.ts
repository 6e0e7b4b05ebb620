import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createAdminMount } from '../../server/admin/index.ts';
import { loadConfig } from '../../server/config/load.ts';
import { type Host, startHost } from '../../server/host.ts';
import { lanAddress } from '../../server/lan.ts';
import { createLogger } from '../../server/log.ts';

const bin = join(import.meta.dirname, '..', '..', 'bin', 'sync-host');

type Cleanup = (fn: () => Promise<void> | void) => void;

function tempDir(onTestFinished: Cleanup): string {
  const dir = mkdtempSync(join(tmpdir(), 'sync-host-ports-'));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A port held by another program for the duration of the test. */
async function occupyPort(onTestFinished: Cleanup): Promise<number> {
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

function runHost(dir: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, '--headless'], { cwd: dir });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    // generous: on a loaded machine a host takes several seconds just to start
    const kill = setTimeout(() => child.kill('SIGKILL'), 50_000);
    child.on('exit', (code, signal) => {
      clearTimeout(kill);
      resolve({ code, stdout: signal ? `${stdout}[killed by ${signal}]` : stdout, stderr });
    });
  });
}

describe('a port already in use', () => {
  const cases = [
    {
      name: 'the auth port (8445)',
      key: 'PORT in auth.conf',
      auth: (p: number) => `PORT=${p}`,
      relay: () => 'ws.port=0\nstatus.port=0',
    },
    {
      name: 'the relay port (8443)',
      key: 'ws.port in relay.conf',
      auth: () => 'PORT=0',
      relay: (p: number) => `ws.port=${p}\nstatus.port=0`,
    },
    {
      name: 'the relay status port (8444)',
      key: 'status.port in relay.conf',
      auth: () => 'PORT=0',
      relay: (p: number) => `ws.port=0\nstatus.port=${p}`,
    },
  ];
  for (const c of cases) {
    it.concurrent(`exits 2 with one line naming ${c.name} and the setting to change`, {
      timeout: 60_000,
    }, async ({ onTestFinished }) => {
      const port = await occupyPort(onTestFinished);
      const dir = tempDir(onTestFinished);
      writeFileSync(
        join(dir, 'auth.conf'),
        `${c.auth(port)}\nBIND=127.0.0.1\nMDNS=off\nLOG_LEVEL=silent\n`,
      );
      writeFileSync(join(dir, 'relay.conf'), `${c.relay(port)}\n`);
      const result = await runHost(dir);
      expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(2);
      expect(result.stderr).toBe(
        `sync-host: port ${port} is already in use; stop the other program or set ${c.key} to a free port\n`,
      );
      expect(result.stdout).not.toContain('admin:');
    });
  }
});

describe('BIND', () => {
  it('is the listen address of the auth port and the relay ports', async () => {
    const dir = tempDir(onTestFinished);
    writeFileSync(join(dir, 'auth.conf'), 'PORT=0\nBIND=127.0.0.1\nMDNS=off\n');
    writeFileSync(join(dir, 'relay.conf'), 'ws.port=0\nstatus.port=0\n');
    const config = loadConfig(dir, {});
    expect(config.relay.bind).toBe('0.0.0.0');
    const logger = createLogger('silent');
    const host: Host = await startHost({
      mode: 'headless',
      config,
      logger,
      print: () => {},
      mount: createAdminMount({ logger, defaultTier: 'free', ui: false }),
    });
    onTestFinished(() => host.close());
    expect(host.auth?.server.address()).toMatchObject({ address: '127.0.0.1' });
    for (const url of [host.urls.auth, host.urls.relay, host.urls.status])
      expect(url).toMatch(/^\w+:\/\/127\.0\.0\.1:\d+$/);
    // Bound to loopback only: the machine's LAN address refuses the connection.
    const lan = lanAddress('0.0.0.0');
    if (lan !== '127.0.0.1') {
      for (const url of [host.urls.auth, host.urls.relay, host.urls.status]) {
        const port = Number(new URL(url ?? '').port);
        const outcome = await new Promise<string>((resolve) => {
          const socket = connect(port, lan);
          socket.once('connect', () => {
            socket.destroy();
            resolve('connected');
          });
          socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
        });
        expect(outcome).toBe('ECONNREFUSED');
      }
    }
  });
});
