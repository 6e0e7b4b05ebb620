import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import type { WebSocket } from 'ws';
import { createLogger } from '../../server/log.ts';
import { type MessageBuffer, openMessageBuffer } from '../../server/relay/buffer.ts';
import { type Connection, createConnection } from '../../server/relay/connection.ts';
import { createLocalBroker } from '../../server/relay/local-broker.ts';
import { createMetrics } from '../../server/relay/metrics.ts';
import { createTokenBucket } from '../../server/relay/rate-limit.ts';
import type { Room } from '../../server/relay/room.ts';
import { createRooms } from '../../server/relay/rooms.ts';
import { Writer } from '../../server/relay/send-queue.ts';
import { createShards } from '../../server/relay/shards.ts';

let dir: string;
let buffer: MessageBuffer;

afterEach(() => {
  buffer.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A connection over a stand-in socket that records what the relay writes to it. */
function recordingConnection(id: number): { conn: Connection; sent: unknown[] } {
  const sent: unknown[] = [];
  const socket = {
    OPEN: 1,
    CONNECTING: 0,
    readyState: 1,
    bufferedAmount: 0,
    send(data: unknown) {
      sent.push(data);
    },
    close() {},
    terminate() {},
  };
  const stream = { writableCorked: 0, cork() {}, uncork() {} };
  const conn = createConnection(
    id,
    socket as unknown as WebSocket,
    stream as unknown as Duplex,
    createTokenBucket(1_000, 1_000),
    new Writer<Connection>(1_000_000, 1_000_000, () => {}),
  );
  return { conn, sent };
}

describe('relay fan-out', () => {
  it('serializes a broadcast once: every receiver and the buffer get the same frame', () => {
    dir = mkdtempSync(join(tmpdir(), 'relay-fanout-'));
    buffer = openMessageBuffer(
      join(dir, 'relay.db'),
      {
        windowMs: 60_000,
        maxMessages: 100,
        deviceMaxBytes: 1_000_000,
        userMaxBytes: 1_000_000,
        maxBytes: 1_000_000,
        expiredRetentionMs: 1_000,
      },
      {
        droppedExpired() {},
        droppedCap() {},
        droppedBound() {},
        flushed() {},
        failed() {},
        recovered() {},
        unhealthy() {},
        opened() {},
      },
    );
    const metrics = createMetrics();
    const logger = createLogger('silent');
    const broker = createLocalBroker({
      buffer,
      metrics,
      logger,
      now: Date.now,
      bufferWindowMs: 60_000,
    });
    const rooms = createRooms(createShards<Room>(), {
      broker,
      metrics,
      logger,
      maxDevices: 64,
    });
    const members = [1, 2, 3, 4, 5].map(recordingConnection);
    for (const [i, { conn }] of members.entries()) {
      rooms.join(conn, { type: 'join', room: 'room', device: i + 1, token: '' });
    }
    for (const { sent } of members) sent.length = 0;
    const text = '{"to":"broadcast","payload":{"a":[1,2,3]}}';
    const sender = members[0]!.conn;
    sender.room?.route(sender, 'broadcast', { a: [1, 2, 3] }, Buffer.from(text));
    const frames = members.slice(1).map(({ sent }) => sent[0]);
    expect(members[0]!.sent).toEqual([]);
    expect(frames.every((frame) => frame === frames[0])).toBe(true);
    expect(String(frames[0])).toBe(
      '{"from":1,"to":"broadcast","room":"room","payload":{"a":[1,2,3]}}',
    );
  });
});
