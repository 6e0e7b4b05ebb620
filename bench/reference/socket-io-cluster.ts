/**
 * Reference for the cluster bench: one Socket.IO server of several, joined through
 * `@socket.io/redis-streams-adapter` on a Redis server, with connection state recovery on (the
 * adapter's way to give a reconnecting client what it missed). Same events as socket-io.ts:
 * `join` ({room, device}, acknowledged), `m` (to, payload) broadcast to the rest of the room as
 * `{from, to, room, payload}`. Run as `tsx socket-io-cluster.ts <redis url> [max disconnection
 * ms, 60000]`; prints `listening <port>`. The adapter's other options are its defaults (one
 * stream for the whole deployment, `maxLen` 10,000 entries).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAdapter } from '@socket.io/redis-streams-adapter';
import { createClient } from 'redis';
import { Server } from 'socket.io';

interface Joined {
  room: string;
  device: string | number;
}

const redis = createClient({ url: process.argv[2] });
await redis.connect();
const http = createServer();
const io = new Server(http, {
  transports: ['websocket'],
  serveClient: false,
  perMessageDeflate: false,
  adapter: createAdapter(redis),
  connectionStateRecovery: {
    maxDisconnectionDuration: Number(process.argv[3] ?? 60_000),
    skipMiddlewares: true,
  },
});
io.on('connection', (socket) => {
  socket.on('join', (join: Joined, ack: (answer: { type: string }) => void) => {
    socket.data = { room: join.room, device: join.device };
    void socket.join(join.room);
    ack({ type: 'joined' });
  });
  socket.on('m', (to: string | number, payload: unknown) => {
    const { room, device } = socket.data as Joined;
    socket.to(room).emit('m', { from: device, to, room, payload });
  });
});
http.listen(0, '127.0.0.1', () => {
  console.log(`listening ${(http.address() as AddressInfo).port}`);
});
process.on('SIGTERM', () => {
  void io
    .close()
    .then(() => redis.quit())
    .finally(() => process.exit(0));
});
