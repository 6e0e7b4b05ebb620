/**
 * `npx tsx bench/cluster-publish.ts [--frames=3000] [--rounds=5]`: the cluster node's own part of
 * a routed frame, in one process against one nats-server, the way of 0ac6aeb ("request":
 * `js.publish` as a request with the routing in four headers, every delivery's headers parsed)
 * against the current one ("record": `Publications` with one inbox, the routing in the record's
 * first bytes, a node's own records skipped unread). Each frame, with the client library's
 * envelope, is published one per event-loop turn (as frames come from separate sockets) to one
 * of 30 rooms, and followed by three consumers per room as three nodes would (one of them the
 * publisher). CPU of this process and of nats-server per frame, both ways alternated, medians.
 * Much steadier than `bench:cluster` on a loaded machine: one process, no sockets to clients.
 */
import { DeliverPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, headers } from '@nats-io/transport-node';
import type { ClusterCounters } from '../server/cluster/cluster-metrics.ts';
import { Publications } from '../server/cluster/publications.ts';
import { RecordSeal } from '../server/cluster/record-seal.ts';
import { ensureStream, followStream, streamOf } from '../server/cluster/room-stream.ts';
import { encodeRecord, senderOf } from '../server/cluster/stream-record.ts';
import { createLogger } from '../server/log.ts';
import { startNatsServer } from '../test/helpers/nats-server.ts';
import { cpuOf } from './cluster-systems.ts';

const arg = (name: string, fallback: number): number => {
  const found = process.argv.find((a) => a.startsWith(`--${name}=`));
  return found === undefined ? fallback : Number(found.slice(name.length + 3));
};
const frames = arg('frames', 3000);
const rounds = arg('rounds', 5);
const roomCount = 30;
const nodes = ['node-a', 'node-b', 'node-c'];
const turn = () => new Promise((resolve) => setImmediate(resolve));
const selfCpu = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
};

const nats = await startNatsServer();
const nc = await connect({ servers: nats.url });
const js = jetstream(nc);
const jsm = await jetstreamManager(nc);
const logger = createLogger('warn', process.stderr);
const counters: ClusterCounters = { published: 0, publishFailures: 0, received: 0, replayed: 0 };
const publications = new Publications(counters, logger);
const envelopeSession = 'bench-session';
let sent = 0;

function frameOf(room: number): Buffer {
  const payload = { t: performance.now(), n: sent, _sync: { s: envelopeSession, n: ++sent } };
  return Buffer.from(JSON.stringify({ from: 1, to: 'broadcast', room, payload }));
}

/** The way before: a JetStream request per frame, routing in headers, every delivery decoded. */
async function requestWay(rooms: string[]): Promise<() => Promise<void>> {
  let seen = 0;
  const stops: Array<() => Promise<unknown>> = [];
  for (const room of rooms) {
    for (const node of nodes) {
      const consumer = await js.consumers.get(streamOf(room).stream, {
        deliver_policy: DeliverPolicy.New,
      });
      const messages = await consumer.consume();
      stops.push(() => messages.close());
      void (async () => {
        for await (const m of messages) {
          const h = m.headers;
          const f = {
            seq: m.seq,
            to: h?.get('t') ?? '*',
            from: h?.get('f') ?? '',
            node: h?.get('n') ?? '',
            nodeSeq: Number(h?.get('q') ?? 0),
            frame: Buffer.from(m.data),
          };
          // as #take did: its own frames decoded, then skipped
          if (f.node === node) seen++;
          else if (f.frame.length >= 0) seen++;
        }
      })();
    }
  }
  return async () => {
    const inFlight = new Set<Promise<unknown>>();
    for (let i = 0; i < frames; i++) {
      const room = rooms[i % roomCount] as string;
      const frame = frameOf(i);
      const h = headers();
      h.set('t', '*');
      h.set('f', senderOf(frame));
      h.set('n', 'node-a');
      h.set('q', String(i));
      const id = /"_sync":\{"s":"([A-Za-z0-9_-]{1,64})","n":(\d{1,16})\}/.exec(frame.toString());
      const p = js
        .publish(streamOf(room).subject, frame, {
          headers: h,
          ...(id ? { msgID: `1.${id[1]}.${id[2]}` } : {}),
        })
        .finally(() => inFlight.delete(p));
      inFlight.add(p);
      await turn();
    }
    await Promise.allSettled([...inFlight]);
    while (seen < frames * nodes.length) await turn();
    await Promise.all(stops.map((stop) => stop()));
  };
}

/**
 * The way now: `Publications`, routing in the record, each record sealed with the shared secret
 * and checked by the other nodes, a node's own records skipped.
 */
const seal = new RecordSeal('bench-secret-0123456789abcdef0123');
async function recordWay(rooms: string[]): Promise<() => Promise<void>> {
  let seen = 0;
  const stops: Array<() => void> = [];
  for (const room of rooms) {
    const last = (await jsm.streams.info(streamOf(room).stream)).state.last_seq;
    for (const node of nodes) {
      stops.push(
        followStream(js, room, last + 1, Buffer.from(node), {
          seal,
          frame: () => seen++,
          own: () => seen++,
          error: (err) => logger.warn({ err: String(err) }, 'follow'),
        }),
      );
    }
  }
  return async () => {
    for (let i = 0; i < frames; i++) {
      const room = rooms[i % roomCount] as string;
      const frame = frameOf(i);
      const n = publications.begin(room);
      const subject = streamOf(room).subject;
      const record = encodeRecord(
        { to: '*', from: senderOf(frame), node: 'node-a', nodeSeq: n, frame },
        { seal, subject },
      );
      publications.send(nc, n, subject, record.payload, record.headers);
      await turn();
    }
    await publications.settled();
    while (seen < frames * nodes.length) await turn();
    for (const stop of stops) stop();
  };
}

const ways = { request: requestWay, record: recordWay };
const results: Record<string, { self: number[]; server: number[] }> = {
  request: { self: [], server: [] },
  record: { self: [], server: [] },
};
for (let round = 0; round < rounds; round++) {
  for (const [name, way] of Object.entries(ways)) {
    const rooms = Array.from({ length: roomCount }, (_, r) => `bench-${name}-${round}-${r}`);
    for (const room of rooms) await ensureStream(jsm, room, 60_000, 1);
    const run = await way(rooms);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const self0 = selfCpu();
    const server0 = cpuOf([nats.pid as number]);
    await run();
    results[name]?.self.push(((selfCpu() - self0) / frames) * 1e6);
    results[name]?.server.push(((cpuOf([nats.pid as number]) - server0) / frames) * 1e6);
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
console.log(
  `${frames} frames × ${rounds} rounds, 30 rooms, 3 followers per room; load ${process.env.LOAD ?? ''}`,
);
console.log('| way | node µs CPU per frame (median, all rounds) | nats-server µs per frame |');
console.log('| --- | --- | --- |');
for (const [name, r] of Object.entries(results)) {
  const all = (xs: number[]) => xs.map((x) => x.toFixed(0)).join(' ');
  console.log(
    `| ${name} | ${median(r.self).toFixed(0)} (${all(r.self)}) | ${median(r.server).toFixed(0)} (${all(r.server)}) |`,
  );
}
publications.stop();
await nc.close();
await nats.dispose();
process.exit(0);
