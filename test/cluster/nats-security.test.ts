import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { positionsBucket } from '../../server/cluster/handover.ts';
import { nodesBucket } from '../../server/cluster/node-liveness.ts';
import { RecordSeal } from '../../server/cluster/record-seal.ts';
import { streamOf } from '../../server/cluster/room-stream.ts';
import { roomHash, rosterBucket, rosterKey } from '../../server/cluster/roster.ts';
import { encodeRecord } from '../../server/cluster/stream-record.ts';
import { createRoomId } from '../../server/tokens.ts';
import { type NatsServer, natsSkipReason, startNatsServer } from '../helpers/nats-server.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { makeCertificates } from '../helpers/test-ca.ts';
import { eventually } from '../helpers/wait.ts';
import { ClusterProcesses, clusterSecret, deviceToken, type RelayNode } from './processes.ts';

const skip = natsSkipReason();
const password = 'nats-password-7f3a9c51e2';
const anonymousWarning = 'lets in clients without credentials';

async function health(node: RelayNode): Promise<{ cluster: { rejected: number; nats: string } }> {
  return (await fetch(`${node.status}/health`).then((r) => r.json())) as {
    cluster: { rejected: number; nats: string };
  };
}

describe.skipIf(skip !== undefined)(`NATS security${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const processes = new ClusterProcesses();
  const clients: RelayClient[] = [];
  let dir: string;
  let secured: NatsServer;
  let open: NatsServer;
  let securedNodes: RelayNode[];
  let openNodes: RelayNode[];
  let ca: string;

  const client = (node: RelayNode) => {
    const c = new RelayClient(node.url);
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sync-host-nats-tls-'));
    const files = makeCertificates(dir);
    ca = files.ca;
    const conf = join(dir, 'nats.conf');
    writeFileSync(
      conf,
      [
        `authorization { users = [ { user: "relay", password: "${password}" } ] }`,
        `tls { cert_file: "${files.cert}", key_file: "${files.key}" }`,
        '',
      ].join('\n'),
    );
    [secured, open] = await Promise.all([startNatsServer(conf), startNatsServer()]);
    const access = { 'cluster.user': 'relay', 'cluster.password': password, 'cluster.caFile': ca };
    const tlsUrl = secured.url.replace('nats://', 'tls://');
    // the secured nodes log everything (the password must be in none of it)
    const level = process.env.CLUSTER_LOG_LEVEL;
    process.env.CLUSTER_LOG_LEVEL = 'debug';
    const safe = Promise.all([
      processes.relayNode(tlsUrl, 'safe-1', access),
      processes.relayNode(tlsUrl, 'safe-2', access),
    ]);
    if (level === undefined) delete process.env.CLUSTER_LOG_LEVEL;
    else process.env.CLUSTER_LOG_LEVEL = level;
    [securedNodes, openNodes] = await Promise.all([safe, processes.relayNodes(open.url, 2)]);
  }, 180_000);

  afterAll(async () => {
    for (const c of clients) c.terminate();
    await processes.dispose();
    await secured?.dispose();
    await open?.dispose();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('routes between nodes signed in over TLS, refuses anonymous clients, and never logs the password', async () => {
    const room = createRoomId(31, clusterSecret);
    const a = client(securedNodes[0]!);
    const b = client(securedNodes[1]!);
    await a.join(room, 1, deviceToken(31, 1));
    await b.join(room, 2, deviceToken(31, 2));
    await a.next('presence');
    a.send({ to: 2, payload: { over: 'tls' } });
    expect((await b.message()).payload).toEqual({ over: 'tls' });

    const url = secured.url.replace('nats://', 'tls://');
    await expect(connect({ servers: url, tls: { caFile: ca }, reconnect: false })).rejects.toThrow(
      /auth/i,
    );
    for (const node of securedNodes) {
      const output = [...node.process.stdout, ...node.process.stderr];
      expect(output.some((line) => line.includes('connected to NATS'))).toBe(true);
      expect(output.filter((line) => line.includes(password))).toEqual([]);
      expect(output.filter((line) => line.includes(anonymousWarning))).toEqual([]);
    }
  });

  it('warns at start when NATS accepts clients without credentials', async () => {
    for (const node of openNodes) {
      await eventually(
        () =>
          [...node.process.stdout, ...node.process.stderr].some((line) =>
            line.includes(anonymousWarning),
          ) || undefined,
        'the warning about anonymous NATS clients',
        10_000,
      );
    }
  });

  it('drops and counts frames, roster entries, revocations, heartbeats and release requests that a NATS client forged', async () => {
    const room = createRoomId(32, clusterSecret);
    const a = client(openNodes[0]!);
    const b = client(openNodes[1]!);
    await a.join(room, 1, deviceToken(32, 1));
    await b.join(room, 2, deviceToken(32, 2));
    await a.next('presence');
    const before = (await health(openNodes[1]!)).cluster.rejected;

    const intruder = await connect({ servers: open.url });
    try {
      const js = jetstream(intruder);
      const { subject } = streamOf(room);
      const forged = (marker: string) => ({
        to: '2',
        from: '1',
        node: 'intruder',
        nodeSeq: 1,
        frame: Buffer.from(JSON.stringify({ from: 1, to: 2, payload: { forged: marker } })),
      });
      // unsealed, and sealed with another secret
      await js.publish(subject, encodeRecord(forged('unsealed')).payload);
      const wrong = new RecordSeal('another-secret-0123456789abcdef');
      await js.publish(subject, encodeRecord(forged('wrong'), { seal: wrong, subject }).payload);
      // the real frame after them reaches b; the stream is followed in order
      a.send({ to: 2, payload: { real: true } });
      expect((await b.message()).payload).toEqual({ real: true });

      const kvm = new Kvm(intruder);
      const roster = await kvm.open(rosterBucket);
      const ghost = { id: 99, node: 'intruder', state: 'present', order: 0, cursor: 0 };
      await roster.put(
        rosterKey(roomHash(room), '99'),
        JSON.stringify({ ...ghost, nodeSeq: 0, droppedAt: 0 }),
      );
      const revoked = await kvm.create('sync-host-revoked', { history: 1 });
      await revoked.put('2', JSON.stringify({ revokedAt: Math.floor(Date.now() / 1000) + 60 }));
      // a heartbeat of a node that does not exist, and a request to b's node to release b
      const beats = await kvm.open(nodesBucket);
      await beats.put(Buffer.from('ghost').toString('hex'), String(Date.now()));
      const release = JSON.stringify({ hash: roomHash(room), device: '2', nonce: 'n' });
      intruder.publish(`sync-host.release.${Buffer.from('node-2').toString('hex')}`, release);

      await eventually(
        async () =>
          (await health(openNodes[1]!)).cluster.rejected >= before + 6 ? true : undefined,
        'the forged records counted',
        10_000,
      );
      const metrics = await fetch(`${openNodes[1]!.status}/metrics`).then((r) => r.text());
      expect(metrics).toMatch(/relay_cluster_rejected_records_total ([6-9]|\d\d)/);
      // b was neither cut off by the forged revocation or release nor told of the forged device
      a.send({ to: 2, payload: { still: 'here' } });
      expect((await b.message()).payload).toEqual({ still: 'here' });
      expect(b.closeInfo).toBeUndefined();
      expect(b.allMessages().map((m) => m.payload)).toEqual([{ real: true }, { still: 'here' }]);
      const c = client(openNodes[1]!);
      const joined = await c.join(room, 3, deviceToken(32, 3));
      expect(joined).toMatchObject({ type: 'joined', devices: [1, 2, 3] });
      const output = [...openNodes[1]!.process.stdout, ...openNodes[1]!.process.stderr];
      expect(output.some((line) => line.includes('without the shared secret’s seal'))).toBe(true);
    } finally {
      await intruder.close();
    }
  });

  it('keeps the roster and the positions in buckets read from the stream leader, never from a replica behind it', async () => {
    const reader = await connect({ servers: open.url });
    try {
      const jsm = await jetstreamManager(reader);
      for (const bucket of [rosterBucket, positionsBucket]) {
        const { config } = await jsm.streams.info(`KV_${bucket}`);
        expect({ bucket, direct: config.allow_direct }).toEqual({ bucket, direct: false });
      }
    } finally {
      await reader.close();
    }
  });
});
