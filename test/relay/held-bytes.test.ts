import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { SendQueue, Writer } from '../../server/relay/send-queue.ts';

let server: WebSocketServer | undefined;
const clients: WebSocket[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) client.terminate();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

/** A real WebSocket pair on loopback: the server side's socket and its TCP stream. */
async function serverSocket(): Promise<{ socket: WebSocket; stream: Duplex }> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  server = wss;
  await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
  const accepted = new Promise<WebSocket>((resolve) => wss.once('connection', resolve));
  const client = new WebSocket(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}/`);
  clients.push(client);
  client.on('error', () => {});
  await new Promise((resolve) => client.once('open', resolve));
  const socket = await accepted;
  return { socket, stream: (socket as unknown as { _socket: Duplex })._socket };
}

/** The end of the event-loop turn, when the writer checks its bounds. */
const turnEnd = () => new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve)));

describe('bytes held for a receiver before they are frames (a catch-up read and its page)', () => {
  it('count in the relay total and close the receiver holding the most past it, never against its own bound', async () => {
    const cut: string[] = [];
    const writer = new Writer<string>(1000, 5000, (owner) => cut.push(owner));
    const { socket, stream } = await serverSocket();
    const queue = new SendQueue('catching up', socket, stream, writer);

    // over its own bound, within the relay's: held bytes wait for room, nobody is closed
    queue.setHeld(4000);
    expect(writer.unsentBytes).toBe(4000);
    expect(queue.pastOwnBound).toBe(false);
    await turnEnd();
    expect(cut).toEqual([]);

    // what it holds now replaces what it held
    queue.setHeld(6000);
    expect(writer.unsentBytes).toBe(6000);
    await turnEnd();
    expect(cut).toEqual(['catching up']);
    // once closed it counts nothing: the relay's total loses it at once
    expect(writer.unsentBytes).toBe(0);
    queue.end();
    queue.setHeld(3000);
    expect(writer.unsentBytes).toBe(0);
  });

  it('leave the total once released', async () => {
    const writer = new Writer<string>(1000, 5000, () => {});
    const { socket, stream } = await serverSocket();
    const queue = new SendQueue('reader', socket, stream, writer);
    queue.setHeld(700);
    expect(writer.unsentBytes).toBe(700);
    expect(writer.holding.has(queue)).toBe(true);
    queue.setHeld(0);
    expect(writer.unsentBytes).toBe(0);
    expect(writer.holding.has(queue)).toBe(false);
  });
});
