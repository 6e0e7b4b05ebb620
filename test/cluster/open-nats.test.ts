import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeConf } from '../helpers/configs.ts';
import { type HostProcess, startHostProcess } from '../helpers/host-process.ts';
import {
  type NatsServer,
  natsSkipReason,
  startConfiguredNatsServer,
  startNatsServer,
} from '../helpers/nats-server.ts';
import { freePort } from '../helpers/ports.ts';
import { eventually } from '../helpers/wait.ts';
import { clusterSecret } from './processes.ts';

const skip = natsSkipReason();

/**
 * A cluster process on a NATS that lets in clients without credentials: it refuses to start
 * (exit 2, one line naming the key), unless `cluster.insecure=true` says so on purpose; and a
 * node started while NATS was away never uses such a server once it appears.
 */
describe.skipIf(skip !== undefined)(
  `cluster on an open NATS${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    let nats: NatsServer;
    const dirs: string[] = [];
    const processes: HostProcess[] = [];

    beforeAll(async () => {
      nats = await startNatsServer();
    }, 60_000);

    afterAll(async () => {
      for (const process of processes) await process.stop('SIGTERM', 10_000).catch(() => {});
      await nats?.dispose();
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    });

    function dir(): string {
      const made = mkdtempSync(join(tmpdir(), 'sync-host-open-nats-'));
      dirs.push(made);
      return made;
    }

    function relayDir(url: string, extra: Record<string, string> = {}): string {
      const made = dir();
      writeConf(made, 'relay.conf', {
        'auth.secret': clusterSecret,
        'sqlite.path': './relay.db',
        'ws.port': 0,
        'status.port': 0,
        bind: '127.0.0.1',
        'cluster.nats': url,
        'cluster.node': 'open-nats-node',
        ...extra,
      });
      return made;
    }

    async function start(args: string[], at: string): Promise<HostProcess> {
      const process = await startHostProcess(args, at, { env: { LOG_LEVEL: 'info' } });
      processes.push(process);
      return process;
    }

    /** The exit code of a process that stops by itself. */
    async function exitOf(process: HostProcess): Promise<number | null> {
      const { child } = process;
      if (child.exitCode !== null) return child.exitCode;
      const [code] = await once(child, 'exit');
      return code as number | null;
    }

    function expectOneLine(process: HostProcess, ...parts: string[]): void {
      const said = process.stderr.filter((line) => line.startsWith('sync-host: '));
      expect(said).toHaveLength(1);
      for (const part of parts) expect(said[0]).toContain(part);
      // no stack trace: nothing printed looks like a frame
      expect(process.stderr.join('\n')).not.toMatch(/^\s+at /m);
    }

    it('a relay node refuses to start, naming cluster.nats and cluster.insecure', async () => {
      const node = await start(['relay'], relayDir(nats.url));
      expect(await exitOf(node)).toBe(2);
      expectOneLine(
        node,
        'relay.conf: cluster.nats: ',
        `NATS at 127.0.0.1:${nats.port}`,
        'cluster.insecure=true',
      );
      expect(node.stdout.some((line) => line.startsWith('relay:'))).toBe(false);
    }, 60_000);

    it('an auth process refuses to start, naming CLUSTER_NATS and CLUSTER_INSECURE', async () => {
      const at = dir();
      writeConf(at, 'auth.conf', {
        PORT: 0,
        BIND: '127.0.0.1',
        MDNS: 'off',
        AUTH_SECRET: clusterSecret,
        CLUSTER_NATS: nats.url,
      });
      const auth = await start(['auth'], at);
      expect(await exitOf(auth)).toBe(2);
      expectOneLine(auth, 'auth.conf: CLUSTER_NATS: ', 'CLUSTER_INSECURE=true');
    }, 60_000);

    it('cluster.insecure=true starts on it, with a warning at the start', async () => {
      const node = await start(['relay'], relayDir(nats.url, { 'cluster.insecure': 'true' }));
      const status = (await node.line('status:', 60_000)).slice('status:'.length).trim();
      await eventually(
        async () => {
          const health = (await fetch(`${status}/health`).then((r) => r.json())) as {
            cluster?: { nats?: string };
          };
          return health.cluster?.nats === 'connected' || undefined;
        },
        'the node connected',
        30_000,
      );
      const warnings = node.stderr.filter((line) =>
        line.includes('cluster.insecure=true: NATS at'),
      );
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/warn/i);
    }, 90_000);

    it('a node started while NATS was away refuses the open server that appears', async () => {
      const port = await freePort();
      const url = `nats://127.0.0.1:${port}`;
      const node = await start(['relay'], relayDir(url));
      const status = (await node.line('status:', 60_000)).slice('status:'.length).trim();
      const store = dir();
      const config = join(store, 'nats.conf');
      writeFileSync(
        config,
        `listen: 127.0.0.1:${port}\njetstream { store_dir: "${join(store, 'js')}" }\n`,
      );
      const late = await startConfiguredNatsServer(config, port);
      try {
        await eventually(
          async () => node.stderr.find((line) => line.includes('cluster: refused: NATS at')),
          'the node refused the open NATS',
          30_000,
        );
        const health = (await fetch(`${status}/health`).then((r) => r.json())) as {
          cluster?: { nats?: string };
        };
        expect(health.cluster?.nats).not.toBe('connected');
      } finally {
        await late.dispose();
      }
    }, 120_000);
  },
);
