import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAuthClient } from '../../client/auth-client.ts';
import { createRoomId } from '../../server/tokens.ts';
import {
  ClusterProcesses,
  clusterSecret,
  deviceToken,
  type RelayNode,
} from '../cluster/processes.ts';
import {
  type NatsServer,
  natsSkipReason,
  startConfiguredNatsServer,
} from '../helpers/nats-server.ts';
import { freePort } from '../helpers/ports.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { makeCertificates, type TestCertificates } from '../helpers/test-ca.ts';
import { docBlock } from './nas-doc.ts';

const skip = natsSkipReason();

/** `text` with `from` replaced by `to`; `from` must be in it (the doc still says it). */
function swap(text: string, from: string | RegExp, to: string): string {
  expect(text).toMatch(from);
  return text.replace(from, to);
}

/** The `key=value` lines of an ini block whose keys start with `prefix`. */
function keysOf(block: string, prefix: string): Record<string, string> {
  const entries = block
    .split('\n')
    .map((line) => /^([\w.]+)=(.*)$/.exec(line.trim()))
    .filter((m): m is RegExpExecArray => m !== null && (m[1] ?? '').startsWith(prefix));
  return Object.fromEntries(entries.map(([, key = '', value = '']) => [key, value.trim()]));
}

/** The doc's nats-server file on 127.0.0.1:`port`, with this test's folders and certificate. */
function serverConfig(dir: string, port: number, files: TestCertificates): string {
  let conf = docBlock('cluster.md', '', 'jetstream {');
  expect(conf).toMatch(/authorization \{\s*users = \[ \{ user: \w+, password: "[^"]+" \} \]/);
  expect(conf).toMatch(/tls \{\s*cert_file: \S+\s*key_file: \S+\s*\}/);
  conf = swap(conf, /listen: \S+/, `listen: 127.0.0.1:${port}`);
  conf = swap(conf, /store_dir: \S+/, `store_dir: "${join(dir, 'jetstream')}"`);
  conf = swap(conf, /cert_file: \S+/, `cert_file: "${files.cert}"`);
  return swap(conf, /key_file: \S+/, `key_file: "${files.key}"`);
}

describe.skipIf(skip !== undefined)(
  `docs/cluster.md's NATS with authorization and TLS${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    const processes = new ClusterProcesses();
    const clients: RelayClient[] = [];
    let dir: string;
    let files: TestCertificates;
    let server: NatsServer;
    let url: string;
    let conf: string;
    let nodes: RelayNode[];
    // the doc's relay.conf and auth.conf lines for NATS, pointed at this server and CA
    let relayAccess: Record<string, string>;
    let authAccess: Record<string, string>;

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'sync-host-cluster-doc-'));
      files = makeCertificates(dir);
      const port = await freePort();
      conf = join(dir, 'sync.conf');
      writeFileSync(conf, serverConfig(dir, port, files));
      server = await startConfiguredNatsServer(conf, port);
      // the name its certificate carries, as the doc says to write it
      url = `tls://localhost:${port}`;
      const relay = keysOf(docBlock('cluster.md', 'ini', 'cluster.nats='), 'cluster.');
      expect(Object.keys(relay)).toEqual(
        expect.arrayContaining(['cluster.user', 'cluster.caFile']),
      );
      const { 'cluster.node': _node, 'cluster.nats': _nats, ...access } = relay;
      relayAccess = { ...access, 'cluster.caFile': files.ca, 'cluster.insecure': 'off' };
      const auth = keysOf(docBlock('cluster.md', 'ini', 'CLUSTER_NATS='), 'CLUSTER_');
      expect(Object.keys(auth)).toEqual(
        expect.arrayContaining(['CLUSTER_USER', 'CLUSTER_CA_FILE']),
      );
      authAccess = {
        ...auth,
        CLUSTER_NATS: url,
        CLUSTER_CA_FILE: files.ca,
        CLUSTER_INSECURE: 'off',
      };
      nodes = await Promise.all(
        ['relay-a', 'relay-b'].map((name) => processes.relayNode(url, name, relayAccess)),
      );
    }, 180_000);

    afterAll(async () => {
      for (const c of clients) c.terminate();
      await processes.dispose();
      await server?.dispose();
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    });

    const client = (node: RelayNode) => {
      const c = new RelayClient(node.url);
      clients.push(c);
      return c;
    };

    it('lets in only its user, and only over TLS with the CA', async () => {
      const user = relayAccess['cluster.user'] ?? '';
      const pass = relayAccess['cluster.password'] ?? '';
      const tls = { caFile: files.ca };
      const options = { servers: url, reconnect: false, timeout: 5_000 };
      await expect(connect({ ...options, tls })).rejects.toThrow(/auth/i);
      await expect(
        connect({ ...options, user, pass, tls: { caFile: files.cert } }),
      ).rejects.toThrow();
      await expect(connect({ ...options, user, pass: `${pass}-wrong`, tls })).rejects.toThrow(
        /auth/i,
      );
      const signed = await connect({ ...options, user, pass, tls });
      await signed.close();
    });

    it('routes between relay nodes with its relay.conf lines, and neither warns nor logs the password', async () => {
      const room = createRoomId(41, clusterSecret);
      const a = client(nodes[0]!);
      const b = client(nodes[1]!);
      await a.join(room, 1, deviceToken(41, 1));
      await b.join(room, 2, deviceToken(41, 2));
      await a.next('presence');
      a.send({ to: 2, payload: { over: 'the doc’s nats-server' } });
      expect((await b.message()).payload).toEqual({ over: 'the doc’s nats-server' });
      const password = relayAccess['cluster.password'] ?? '';
      for (const node of nodes) {
        const output = [...node.process.stdout, ...node.process.stderr];
        expect(output.filter((line) => line.includes('without credentials'))).toEqual([]);
        expect(output.filter((line) => line.includes(password))).toEqual([]);
      }
    });

    it('carries a revocation from an auth process with its auth.conf lines to the nodes (4003)', {
      timeout: 90_000,
    }, async () => {
      const auth = await processes.authProcess(url, authAccess);
      const keeper = await auth.signIn('owner@example.org', 'keeper');
      const leaving = await auth.signIn('owner@example.org', 'leaving');
      const room = createRoomId(keeper.user.id, clusterSecret);
      const onNode = client(nodes[1]!);
      expect(await onNode.join(room, leaving.device.id, leaving.deviceToken)).toMatchObject({
        type: 'joined',
      });
      const owner = createAuthClient({ authUrl: auth.url, deviceToken: keeper.deviceToken });
      await owner.deleteDevice(leaving.device.id);
      expect((await onNode.waitClosed(10_000)).code).toBe(4003);
      const output = [...auth.process.stdout, ...auth.process.stderr].join('\n');
      expect(output).not.toContain(authAccess.CLUSTER_PASSWORD);
    });

    it('takes its cluster block for a 3-server NATS cluster (nats-server -t)', async () => {
      let routes = docBlock('cluster.md', '', 'cluster {');
      expect(routes).toMatch(/authorization \{ user: \w+, password: "[^"]+" \}/);
      routes = swap(routes, /listen: \S+/, `listen: 127.0.0.1:${await freePort()}`);
      const full = join(dir, 'nats1.conf');
      const single = serverConfig(dir, await freePort(), files);
      writeFileSync(full, `server_name: nats1\n${single}\n${routes}\n`);
      const check = spawnSync('nats-server', ['-t', '-c', full], { encoding: 'utf8' });
      expect(check.status, `${check.stdout}${check.stderr}`).toBe(0);
    });
  },
);
