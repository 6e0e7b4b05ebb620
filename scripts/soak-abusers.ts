/**
 * The abusive clients of the soak run (`scripts/soak.ts`), from their own loopback address, in
 * one of the soak's rooms: a receiver that stops reading (paused socket; closed with 1013, it
 * joins again and stops again), a sender flooding past the rate limit, a device sending junk
 * (invalid JSON, wrong shapes, unknown types, then a binary frame that gets it closed, and again),
 * and unfinished upgrade requests kept open in numbers beyond the per-address limit.
 */
import { connect, type Socket } from 'node:net';
import { WebSocket } from 'ws';

export interface AbuserOptions {
  relayUrl: string;
  /** The room they join, and three devices of its user issued by the auth service. */
  room: string;
  devices: Array<{ id: number; token: string }>;
  /** Their client address (any of 127/8 on Linux). */
  address: string;
  /** The address of the unfinished upgrade requests (they fill its limit of unjoined). */
  halfOpenAddress: string;
  /** The relay's `rate.perSecond`: the flooder sends a tenth more. */
  ratePerSecond: number;
}

export interface Abusers {
  stop(): void;
  /** What happened to them: closes by code, error frames by code, refused upgrades. */
  report(): Record<string, unknown>;
}

const junkFrames = [
  'not json',
  '{"to":"broadcast","payload":1}',
  '{"type":"nope"}',
  '[]',
  '{"to":"broadcast"}',
  `{"to":"broadcast","payload":{"deep":${'['.repeat(100)}${']'.repeat(100)}}}`,
];

export function startAbusers(options: AbuserOptions): Abusers {
  const { relayUrl, room, address } = options;
  const closes = new Map<string, number>();
  const errorFrames = new Map<string, number>();
  const count = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);
  const timers: NodeJS.Timeout[] = [];
  const sockets = new Set<WebSocket>();
  const raw = new Set<Socket>();
  let running = true;
  let upgradesRefused = 0;
  let upgradesCut = 0;
  let floodSent = 0;

  /** A device of the room that joins, runs `joinedThen` once joined, and joins again after a close. */
  function device(name: string, which: number, joinedThen: (socket: WebSocket) => void): void {
    if (!running) return;
    const { id, token } = options.devices[which] as { id: number; token: string };
    const socket = new WebSocket(relayUrl, { localAddress: address });
    sockets.add(socket);
    socket.on('open', () => socket.send(JSON.stringify({ type: 'join', room, device: id, token })));
    socket.on('message', (data) => {
      const frame = JSON.parse(String(data)) as { type?: string; code?: string };
      if (frame.type === 'joined') joinedThen(socket);
      if (frame.type === 'error') count(errorFrames, `${name} ${frame.code}`);
    });
    socket.on('error', () => {});
    socket.on('close', (code) => {
      sockets.delete(socket);
      count(closes, `${name} ${code}`);
      timers.push(setTimeout(() => device(name, which, joinedThen), 1_000));
    });
  }

  // stops reading once joined: the relay closes it with 1013 and buffers for it
  const pausedId = options.devices[0]?.id as number;
  device('paused', 0, (socket) => {
    socket.pause();
    // reads again after a while: the close (1013) it finds makes it join and stop again
    timers.push(setTimeout(() => socket.resume(), 10_000));
  });
  // a tenth above the rate limit, all the time: small broadcasts, and 16 KiB messages to the
  // paused receiver (so that it is past relay.maxQueuedBytes within seconds)
  const padding = 'f'.repeat(16_384);
  device('flooder', 1, (socket) => {
    const started = Date.now();
    let sentHere = 0;
    const timer = setInterval(() => {
      if (socket.readyState !== socket.OPEN) {
        clearInterval(timer);
        return;
      }
      // by the clock, not by the ticks: a busy event loop ticks late
      const due = Math.floor(((Date.now() - started) * options.ratePerSecond * 1.1) / 1_000);
      for (; sentHere < due; sentHere++) {
        const payload = floodSent % 2 === 0 ? { flood: floodSent } : { flood: floodSent, padding };
        socket.send(
          JSON.stringify({ to: floodSent++ % 2 === 0 ? 'broadcast' : pausedId, payload }),
        );
      }
    }, 10);
    timers.push(timer);
  });
  // junk frames, then a binary frame (closed with 1003), then again
  device('junk', 2, (socket) => {
    let sent = 0;
    const timer = setInterval(() => {
      if (socket.readyState !== socket.OPEN) {
        clearInterval(timer);
        return;
      }
      if (++sent % 50 === 0) socket.send(Buffer.from([1, 2, 3]));
      else socket.send(junkFrames[sent % junkFrames.length] as string);
    }, 20);
    timers.push(timer);
  });
  // 64 unfinished upgrade requests, opened again as the relay closes them
  const port = Number(new URL(relayUrl).port);
  function halfOpen(): void {
    if (!running) return;
    const socket = connect({ port, host: '127.0.0.1', localAddress: options.halfOpenAddress });
    raw.add(socket);
    let answered = false;
    socket.on('data', (data) => {
      answered = true;
      if (data.toString('latin1').startsWith('HTTP/1.1 429')) upgradesRefused++;
    });
    socket.on('error', () => {});
    socket.on('connect', () =>
      socket.write('GET / HTTP/1.1\r\nHost: relay\r\nUpgrade: websocket\r\n'),
    );
    socket.on('close', () => {
      raw.delete(socket);
      if (!answered) upgradesCut++;
      timers.push(setTimeout(halfOpen, 100));
    });
  }
  for (let i = 0; i < 64; i++) halfOpen();

  return {
    stop() {
      running = false;
      for (const timer of timers) clearTimeout(timer);
      for (const socket of sockets) socket.terminate();
      for (const socket of raw) socket.destroy();
    },
    report() {
      return {
        closes: Object.fromEntries(closes),
        errorFrames: Object.fromEntries(errorFrames),
        floodSent,
        upgradesRefused,
        upgradesCutUnanswered: upgradesCut,
      };
    },
  };
}
