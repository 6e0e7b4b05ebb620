import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach } from 'vitest';
import { type ConfValues, writeConf } from './configs.ts';
import { type HostProcess, startHostProcess } from './host-process.ts';
import { RelayClient } from './relay-client.ts';

/**
 * The spawned hosts, relay clients and temp folders of one test file, registered with its
 * hooks: after each test the clients are terminated and the hosts killed (SIGKILL; a test that
 * checks a graceful stop does it itself); after the file the folders are removed.
 */
export function processScope(prefix: string) {
  const dirs: string[] = [];
  const processes: HostProcess[] = [];
  const clients: RelayClient[] = [];
  afterEach(async () => {
    for (const client of clients.splice(0)) client.terminate();
    await Promise.all(processes.splice(0).map((p) => p.stop('SIGKILL').catch(() => null)));
  });
  afterAll(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  return {
    /** A fresh folder under the system's temp dir, removed after the file. */
    tempDir(name = prefix): string {
      const dir = mkdtempSync(join(tmpdir(), name));
      dirs.push(dir);
      return dir;
    },
    /** `bin/sync-host <args> --config-dir <dir>`, waited for as startHostProcess does. */
    async start(
      args: string[],
      dir: string,
      options?: Parameters<typeof startHostProcess>[2],
    ): Promise<HostProcess> {
      const host = await startHostProcess(args, dir, options);
      processes.push(host);
      return host;
    },
    /**
     * `sync-host auth` in `dir` on loopback (port `PORT` or an ephemeral one, no mDNS) with
     * `AUTH_SECRET` and the other auth.conf keys given; resolves with its process and URL.
     */
    async startAuth(dir: string, conf: ConfValues): Promise<{ process: HostProcess; url: string }> {
      writeConf(dir, 'auth.conf', { PORT: 0, BIND: '127.0.0.1', MDNS: 'off', ...conf });
      const process = await this.start(['auth'], dir);
      return { process, url: await process.url('auth') };
    },
    /** A relay client, terminated after the test. */
    connect(url: string): RelayClient {
      const client = new RelayClient(url);
      clients.push(client);
      return client;
    },
    /** Stops every host started so far with `signal` (the next test starts afresh). */
    async stopAll(signal: NodeJS.Signals): Promise<Array<number | null>> {
      return Promise.all(processes.splice(0).map((p) => p.stop(signal)));
    },
  };
}
