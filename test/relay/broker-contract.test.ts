import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { DeviceId } from '../../protocol/relay-frames.ts';
import { createClusterBroker } from '../../server/cluster/cluster-broker.ts';
import { parseConf } from '../../server/config/conf-file.ts';
import { buildRelayConfig } from '../../server/config/relay-config.ts';
import { createLogger } from '../../server/log.ts';
import type {
  Admission,
  Broker,
  DepartureReason,
  RoomLine,
  RoomListener,
} from '../../server/relay/broker.ts';
import { createLocalBroker } from '../../server/relay/local-broker.ts';
import { openLocalBuffer } from '../../server/relay/local-buffer.ts';
import { createMetrics } from '../../server/relay/metrics.ts';
import { MemberRecords } from '../../server/relay/room-members.ts';
import { type NatsServer, natsSkipReason, startNatsServer } from '../helpers/nats-server.ts';
import { eventually } from '../helpers/wait.ts';

/**
 * One suite of what a room may count on from its broker, run against every broker: the
 * in-process one on its SQLite buffer and the cluster one on a nats-server of the test's own.
 */

const windowMs = 60_000;

/** A clock the test moves: the buffer window passes without waiting for it. */
interface Clock {
  now(): number;
  advance(ms: number): void;
}

function testClock(): Clock {
  let offset = 0;
  return {
    now: () => Date.now() + offset,
    advance(ms) {
      offset += ms;
    },
  };
}

/** Makes a broker for one test; `dispose` closes it and removes what it made. */
interface BrokerFactory {
  make(clock: Clock): Promise<Broker>;
  dispose(): Promise<void>;
}

/** What a room heard from its line, in order (a host only noted, not announced, is not heard). */
type Heard =
  | { event: 'joined'; device: DeviceId }
  | { event: 'left'; device: DeviceId; reason: DepartureReason }
  | { event: 'host'; device: DeviceId }
  | { event: 'deliver'; frame: string; to: string | undefined }
  | { event: 'replaced'; device: string };

/** A join's answer: what was kept for the device, or the refusal. */
type Answer = (admission: Admission | undefined) => void;

/**
 * A room as the test plays it: what it heard, the room's record of itself kept from those
 * events (as `Room` keeps it), and the answers its joins wait for.
 */
interface TestRoom extends RoomListener {
  heard: Heard[];
  members: MemberRecords;
  answers: Map<number, Answer>;
}

function recorder(): TestRoom {
  const heard: Heard[] = [];
  const members = new MemberRecords();
  const answers = new Map<number, Answer>();
  const answer = (ticket: number, admission: Admission | undefined) => {
    answers.get(ticket)?.(admission);
    answers.delete(ticket);
  };
  return {
    heard,
    members,
    answers,
    admitted: (ticket, admission) => {
      members.admitted(admission);
      answer(ticket, admission);
    },
    refused: (ticket) => answer(ticket, undefined),
    joined: (device) => {
      members.joined(device);
      heard.push({ event: 'joined', device });
    },
    left: (device, reason) => {
      members.left(device);
      heard.push({ event: 'left', device, reason });
    },
    hostChanged: (device, announced) => {
      members.host(device);
      if (announced) heard.push({ event: 'host', device });
    },
    deliver: (frame, to) => heard.push({ event: 'deliver', frame: frame.toString('utf8'), to }),
    replaced: (device) => {
      heard.push({ event: 'replaced', device });
      return [];
    },
  };
}

let tickets = 0;

/** A join answered: what was kept for the device, or the refusal. */
function joinAs(
  line: RoomLine,
  room: TestRoom,
  device: DeviceId,
): Promise<{ frames: readonly string[]; gap: boolean }> {
  return new Promise((resolve, reject) => {
    const ticket = ++tickets;
    room.answers.set(ticket, (admission) => {
      if (admission === undefined) reject(new Error('refused'));
      else resolve({ frames: admission.frames, gap: admission.gap });
    });
    line.join(device, ticket);
  });
}

/** A routed frame as the room builds it. */
function routed(from: DeviceId, to: DeviceId | 'broadcast', text: string): Buffer {
  const payload = JSON.stringify({ text });
  return Buffer.from(
    `{"from":${JSON.stringify(from)},"to":${JSON.stringify(to)},"room":"r","payload":${payload}}`,
  );
}

let rooms = 0;
/** A room id of its own for each test (the cluster's streams outlive a broker). */
const freshRoom = () => `contract-room-${process.pid}-${++rooms}`;

function brokerContract(name: string, factory: () => BrokerFactory, skip?: string): void {
  describe.skipIf(skip !== undefined)(`broker contract: ${name}${skip ? ` (${skip})` : ''}`, () => {
    let made: BrokerFactory;
    let broker: Broker;
    let clock: Clock;

    beforeAll(() => {
      made = factory();
    });
    afterAll(async () => {
      await made?.dispose();
    });

    async function start(): Promise<Broker> {
      clock = testClock();
      broker = await made.make(clock);
      await eventually(() => broker.accepting(), 'the broker accepts joins');
      return broker;
    }

    afterEach(async () => {
      await broker?.close();
    });

    /** A new broker's room of device 1 and `dropped`, which dropped and is kept for. */
    async function roomWithDropped(dropped = 2): Promise<{ listener: TestRoom; line: RoomLine }> {
      await start();
      const listener = recorder();
      const line = broker.open(freshRoom(), listener);
      await joinAs(line, listener, 1);
      await joinAs(line, listener, dropped);
      line.depart(String(dropped), 'disconnect', []);
      await eventually(() => broker.absentDevices() === 1, 'the device is kept for');
      return { listener, line };
    }

    it('accepts joins once ready; the first device is host, the others follow in join order', async () => {
      await start();
      const listener = recorder();
      const line = broker.open(freshRoom(), listener);
      expect(await joinAs(line, listener, 1)).toEqual({ frames: [], gap: false });
      expect(await joinAs(line, listener, 'two')).toEqual({ frames: [], gap: false });
      await eventually(() => listener.members.size === 2, 'both devices present');
      expect(listener.members.devices()).toEqual([1, 'two']);
      expect(listener.members.hostKey).toBe('1');
      expect(listener.members.idOf('two')).toBe('two');
      expect(listener.members.idOf('3')).toBeUndefined();
      await eventually(
        () => listener.heard.some((h) => h.event === 'joined' && h.device === 'two'),
        'the second join heard',
      );
    });

    it('tells a room that opens the line who is present and who is host, without asking', async () => {
      await start();
      const id = freshRoom();
      const first = recorder();
      const line = broker.open(id, first);
      await joinAs(line, first, 1);
      await joinAs(line, first, 'two');
      await eventually(() => first.members.size === 2, 'both devices present');
      await eventually(() => first.members.hostKey === '1', 'the first device is host');
      line.release();
      const again = recorder();
      broker.open(id, again);
      expect(again.members.devices()).toEqual([1, 'two']);
      expect(again.members.hostKey).toBe('1');
      expect(again.heard.filter((h) => h.event !== 'joined')).toEqual([]);
    });

    it('a departure is heard, and the longest present becomes host', async () => {
      await start();
      const listener = recorder();
      const line = broker.open(freshRoom(), listener);
      await joinAs(line, listener, 1);
      await joinAs(line, listener, 2);
      await joinAs(line, listener, 3);
      line.depart('1', 'leave', []);
      await eventually(() => listener.members.hostKey === '2', 'the second device is host');
      await eventually(
        () => listener.heard.some((h) => h.event === 'host' && h.device === 2),
        'the new host heard',
      );
      expect(listener.heard).toContainEqual({ event: 'left', device: 1, reason: 'leave' });
      expect(listener.members.devices()).toEqual([2, 3]);
    });

    it('keeps what is sent to a device that dropped, in order, and replays it when it rejoins', async () => {
      const { listener, line } = await roomWithDropped();
      expect(line.sendTo('2', routed(1, 2, 'first'))).toBe(true);
      line.broadcast(routed(1, 'broadcast', 'second'));
      await broker.settled();
      const replay = await joinAs(line, listener, 2);
      expect(replay.gap).toBe(false);
      expect(replay.frames.map((frame) => JSON.parse(frame).payload.text)).toEqual([
        'first',
        'second',
      ]);
      await eventually(() => broker.absentDevices() === 0, 'nobody is kept for');
    });

    it('keeps no notice of the relay for a device that dropped, only the routed frames', async () => {
      const { listener, line } = await roomWithDropped();
      line.notice(Buffer.from('{"type":"chunks-lost","ids":["sLost"]}'));
      expect(line.sendTo('2', routed(1, 2, 'kept'))).toBe(true);
      await broker.settled();
      const replay = await joinAs(line, listener, 2);
      expect(replay.frames.map((frame) => JSON.parse(frame).payload.text)).toEqual(['kept']);
      // the devices connected here are the room's to tell: the line hands nothing back
      expect(listener.heard.filter((h) => h.event === 'deliver')).toEqual([]);
    });

    it('keeps nothing for a device that left, and has no such device to send to', async () => {
      await start();
      const listener = recorder();
      const line = broker.open(freshRoom(), listener);
      await joinAs(line, listener, 1);
      await joinAs(line, listener, 2);
      line.depart('2', 'leave', []);
      await eventually(() => listener.members.idOf('2') === undefined, 'the device is gone');
      expect(line.sendTo('2', routed(1, 2, 'lost'))).toBe(false);
      expect(line.sendTo('9', routed(1, 9, 'nobody'))).toBe(false);
      expect(broker.absentDevices()).toBe(0);
      expect(await joinAs(line, listener, 2)).toEqual({ frames: [], gap: false });
    });

    it('past the buffer window a dropped device is no longer kept for, and learns of a gap', async () => {
      const { listener, line } = await roomWithDropped();
      expect(line.sendTo('2', routed(1, 2, 'missed'))).toBe(true);
      await broker.settled();
      clock.advance(windowMs + 1_000);
      expect(line.sendTo('2', routed(1, 2, 'too late'))).toBe(false);
      broker.sweep();
      await eventually(() => broker.absentDevices() === 0, 'the window passed');
      const replay = await joinAs(line, listener, 2);
      expect(replay.frames).toEqual([]);
      expect(replay.gap).toBe(true);
    });

    it('a revoked device is kept for nowhere, and its revocation is remembered', async () => {
      const { line } = await roomWithDropped(7);
      line.sendTo('7', routed(1, 7, 'secret'));
      broker.revoke('7', 1_700_000_000);
      expect(broker.revokedAt('7')).toBe(1_700_000_000);
      await eventually(() => broker.absentDevices() === 0, 'nothing kept for the revoked device');
      expect(line.sendTo('7', routed(1, 7, 'after'))).toBe(false);
    });

    it('a device that joins again keeps its place and role, and nobody hears of it', async () => {
      await start();
      const listener = recorder();
      const line = broker.open(freshRoom(), listener);
      await joinAs(line, listener, 1);
      await joinAs(line, listener, 2);
      await eventually(() => listener.members.size === 2, 'both devices present');
      const heard = listener.heard.length;
      await joinAs(line, listener, 1);
      expect(listener.members.devices()).toEqual([1, 2]);
      expect(listener.members.hostKey).toBe('1');
      expect(listener.heard.slice(heard).filter((h) => h.event !== 'deliver')).toEqual([]);
    });

    it('settles, reports itself healthy, and describes what it keeps', async () => {
      await start();
      const listener = recorder();
      const line = broker.open(freshRoom(), listener);
      await joinAs(line, listener, 1);
      await joinAs(line, listener, 2);
      line.depart('2', 'disconnect', []);
      line.sendTo('2', routed(1, 2, 'kept'));
      await broker.settled();
      expect(broker.healthy()).toBe(true);
      const report = broker.describe();
      expect(report.stored + report.pending).toBeGreaterThanOrEqual(0);
      expect(typeof report.metrics).toBe('string');
      line.dropAll(new Map());
      line.release();
    });
  });
}

brokerContract('in-process on SQLite', () => {
  const dir = mkdtempSync(join(tmpdir(), 'broker-contract-'));
  let runs = 0;
  return {
    async make(clock) {
      const path = join(dir, `relay-${++runs}.db`);
      const entries = parseConf(`sqlite.path = ${path}\n`, 'relay.conf');
      const config = buildRelayConfig(entries, 'relay.conf', dir, dir);
      const metrics = createMetrics();
      const logger = createLogger('silent');
      return createLocalBroker({
        buffer: openLocalBuffer(config, 60_000, metrics, logger),
        metrics,
        logger,
        now: clock.now,
        bufferWindowMs: windowMs,
      });
    },
    async dispose() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

const skip = natsSkipReason();
brokerContract(
  'cluster on NATS JetStream',
  () => {
    let nats: NatsServer | undefined;
    let nodes = 0;
    return {
      async make(clock) {
        // a server of its own for each test: a roster bucket nobody else wrote to
        await nats?.dispose();
        nats = await startNatsServer();
        return createClusterBroker({
          urls: [nats.url],
          node: `contract-${++nodes}`,
          bufferWindowMs: windowMs,
          secret: 'a-contract-test-secret-of-32-bytes',
          logger: createLogger('silent'),
          now: clock.now,
        });
      },
      async dispose() {
        await nats?.dispose();
      },
    };
  },
  skip === undefined ? undefined : `skipped: ${skip}`,
);
