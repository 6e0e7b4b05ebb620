import type { AddressInfo, Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { SendQueue, Writer } from '../../server/relay/send-queue.ts';
import { eventually } from '../helpers/wait.ts';

/**
 * A receiver's queue with binary frames (the host's `chunk` answers in the binary form) among
 * text ones, over a real socket whose reader stopped: queued binary frames go out as binary
 * frames, in order, once it reads again, and are never handed back to be kept for the device.
 */

const closers: Array<() => unknown> = [];

afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

const tcpOf = (socket: WebSocket) => (socket as unknown as { _socket: Socket })._socket;
const turn = () => new Promise((resolve) => setImmediate(resolve));

/** A queue on the relay's side of a real connection whose client does not read. */
async function stalledQueue() {
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  closers.push(() => new Promise((resolve) => server.close(resolve)));
  const accepted = new Promise<WebSocket>((resolve) => server.on('connection', resolve));
  await new Promise((resolve) => server.once('listening', resolve));
  const { port } = server.address() as AddressInfo;
  const client = new WebSocket(`ws://127.0.0.1:${port}`);
  closers.push(() => client.terminate());
  const received: Array<{ text: string; binary: boolean }> = [];
  client.on('message', (data, binary) => received.push({ text: String(data), binary }));
  await new Promise((resolve) => client.once('open', resolve));
  const socket = await accepted;
  const writer = new Writer<string>(1 << 30, 1 << 30, () => {});
  const queue = new SendQueue('receiver', socket, tcpOf(socket), writer);
  tcpOf(client).pause();
  // Frames of 1 MB until the socket stops taking them: from then on they wait in the queue.
  const filler = Buffer.alloc(1_000_000, 0x61);
  let fillers = 0;
  while (!queue.isBehind && fillers < 500) {
    queue.send(filler);
    fillers++;
    await turn();
  }
  expect(queue.isBehind).toBe(true);
  return { queue, client, received, fillers };
}

describe('binary frames in a send queue', () => {
  it('goes out as binary frames, in order with the text ones, once the receiver reads', async () => {
    const { queue, client, received, fillers } = await stalledQueue();
    queue.sendBinary(Buffer.from('binary answer'));
    queue.send(Buffer.from('{"after":true}'));
    tcpOf(client).resume();
    await eventually(() => received.length === fillers + 2, 'every frame received');
    expect(received.slice(fillers)).toEqual([
      { text: 'binary answer', binary: true },
      { text: '{"after":true}', binary: false },
    ]);
    expect(received.slice(0, fillers).every((frame) => !frame.binary)).toBe(true);
  });

  it('never hands a queued binary frame back to be kept for the device, only the text ones', async () => {
    const { queue } = await stalledQueue();
    queue.send(Buffer.from('{"before":true}'), 3);
    queue.sendBinary(Buffer.from('binary answer'));
    queue.send(Buffer.from('{"after":true}'));
    expect(queue.takeUnsent()).toEqual([
      { frame: Buffer.from('{"before":true}'), position: 3 },
      { frame: Buffer.from('{"after":true}'), position: undefined },
    ]);
    expect(queue.writer.queuedBytes).toBe(0);
  });
});
