import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAuthClient } from '../../client/auth-client.ts';
import type { SignedIn } from '../../client/auth-types.ts';
import { signDeviceToken } from '../../server/tokens.ts';
import { writeConf } from '../helpers/configs.ts';
import { type HostProcess, startHostProcess } from '../helpers/host-process.ts';
import { eventually } from '../helpers/wait.ts';

/** Starting a process takes long on a loaded 2-core machine; a cluster test starts several. */
const startDeadlineMs = 60_000;

async function urlOf(process: HostProcess, label: string): Promise<string> {
  return (await process.line(`${label}:`, startDeadlineMs)).slice(label.length + 1).trim();
}

export const clusterSecret = 'cluster-test-secret-0123456789abcdef';

/** A device token of `userId`'s device signed with the cluster's secret, issued now. */
export const deviceToken = (userId: number, deviceId: number): string =>
  signDeviceToken(
    { userId, deviceId, issuedAt: Math.floor(Date.now() / 1000) },
    clusterSecret,
    'hmac-sha256',
  );

/** Spawned processes and folders of one cluster test file, all stopped and removed by `dispose`. */
export class ClusterProcesses {
  readonly processes: HostProcess[] = [];
  readonly dirs: string[] = [];

  dir(): string {
    const dir = mkdtempSync(join(tmpdir(), 'sync-host-cluster-'));
    this.dirs.push(dir);
    return dir;
  }

  /**
   * `bin/sync-host relay` as one cluster node on loopback with ephemeral ports; `nodeArgs` are
   * options for node itself (a benchmark's `--cpu-prof`).
   */
  async relayNode(
    nats: string,
    node: string,
    extra: Record<string, string | number> = {},
    nodeArgs: string[] = [],
  ): Promise<RelayNode> {
    const dir = this.dir();
    writeConf(dir, 'relay.conf', {
      'auth.secret': clusterSecret,
      'sqlite.path': './relay.db',
      'ws.port': 0,
      'status.port': 0,
      bind: '127.0.0.1',
      'cluster.nats': nats,
      'cluster.node': node,
      // the tests' nats-server lets anyone in; the docs' test sets credentials and turns it off
      'cluster.insecure': 'true',
      ...extra,
    });
    const process = await startHostProcess(['relay'], dir, {
      env: { LOG_LEVEL: globalThis.process.env.CLUSTER_LOG_LEVEL ?? 'warn' },
      nodeArgs,
    });
    this.processes.push(process);
    const started = {
      process,
      url: await urlOf(process, 'relay'),
      status: await urlOf(process, 'status'),
    };
    await eventually(
      async () => {
        const health = await fetch(`${started.status}/health`).then((r) => r.json());
        return (
          (health as { cluster?: { nats?: string } }).cluster?.nats === 'connected' || undefined
        );
      },
      `${node} taking joins`,
      startDeadlineMs,
    );
    return started;
  }

  /** `count` relay nodes `node-1`... started side by side. */
  relayNodes(
    nats: string,
    count: number,
    extra: Record<string, string | number> = {},
    nodeArgs: string[] = [],
  ): Promise<RelayNode[]> {
    const names = Array.from({ length: count }, (_, i) => `node-${i + 1}`);
    return Promise.all(names.map((name) => this.relayNode(nats, name, extra, nodeArgs)));
  }

  /** `bin/sync-host auth` on SQLite publishing revocations to `nats` (auth.conf keys `extra` besides). */
  async authProcess(
    nats: string,
    extra: Record<string, string | number> = {},
  ): Promise<AuthProcess> {
    const dir = this.dir();
    writeConf(dir, 'auth.conf', {
      PORT: 0,
      BIND: '127.0.0.1',
      MDNS: 'off',
      AUTH_SECRET: clusterSecret,
      CLUSTER_NATS: nats,
      CLUSTER_INSECURE: 'true',
      ...extra,
    });
    const process = await startHostProcess(['auth'], dir);
    this.processes.push(process);
    const url = await urlOf(process, 'auth');
    return {
      process,
      url,
      async signIn(email, deviceName) {
        const auth = createAuthClient({ authUrl: url });
        const prefix = `[dev] Magic link token for ${email}: `;
        const before = process.stdout.filter((line) => line.startsWith(prefix)).length;
        await auth.requestLogin(email);
        const line = await eventually(
          () => process.stdout.filter((l) => l.startsWith(prefix))[before],
          `magic link for ${email}`,
          10_000,
        );
        return auth.signIn(line.slice(prefix.length).trim(), { deviceName, platform: 'test' });
      },
    };
  }

  async dispose(): Promise<void> {
    await Promise.all(this.processes.splice(0).map((p) => p.stop('SIGKILL').catch(() => null)));
    for (const dir of this.dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  }
}

export interface RelayNode {
  process: HostProcess;
  /** ws:// URL of the node. */
  url: string;
  /** http:// URL of its status port. */
  status: string;
}

export interface AuthProcess {
  process: HostProcess;
  url: string;
  /** Signs a new device in through a dev-mode magic link. */
  signIn(email: string, deviceName: string): Promise<SignedIn>;
}
