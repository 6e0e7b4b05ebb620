import { describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import {
  connectionDefaults,
  type RelayConnectionOptions,
  resolveConnectionOptions,
} from '../../client/connection-options.ts';
import { createRelayConnection } from '../../client/relay-connection.ts';

const base: RelayConnectionOptions = {
  url: 'ws://127.0.0.1:9',
  room: '1.abc.def',
  device: '2',
  token: '1:2:3.ab',
  WebSocket,
};

describe('relay connection options', () => {
  it('fills in every default once, also for options passed as undefined', () => {
    const resolved = resolveConnectionOptions({ ...base, maxQueuedMessages: undefined });
    expect(resolved).toMatchObject({ ...connectionDefaults, url: base.url, WebSocket });
    expect(resolved.backoff.attempts).toBe(0);
    const connection = createRelayConnection({ ...base, maxQueuedMessages: undefined });
    for (let n = 0; n < connectionDefaults.maxQueuedMessages; n++) connection.broadcast({ n });
    expect(() => connection.broadcast({ n: -1 })).toThrow(
      expect.objectContaining({ code: 'queue_full' }),
    );
  });

  it.each<[Partial<RelayConnectionOptions>, string]>([
    [{ rateBurst: 0.5 }, 'rateBurst must be at least 1, or nothing could ever be sent (got 0.5)'],
    [{ maxQueuedMessages: 0 }, 'maxQueuedMessages must be a whole number of at least 1 (got 0)'],
    [{ maxMessageBytes: 1.5 }, 'maxMessageBytes must be a whole number of at least 1 (got 1.5)'],
    [{ ratePerSecond: 0 }, 'ratePerSecond must be a finite number above 0 (got 0)'],
    [{ joinTimeoutMs: -1 }, 'joinTimeoutMs must be a finite number above 0 (got -1)'],
    [
      { keepAliveMs: Number.POSITIVE_INFINITY },
      'keepAliveMs must be a finite number above 0 (got Infinity)',
    ],
    [{ pongTimeoutMs: Number.NaN }, 'pongTimeoutMs must be a finite number above 0 (got NaN)'],
  ])('refuses %o in the constructor: %s', (wrong, message) => {
    expect(() => createRelayConnection({ ...base, ...wrong })).toThrow(
      expect.objectContaining({ code: 'invalid_options', message }),
    );
  });

  it.skipIf('WebSocket' in globalThis)(
    'refuses to start without a WebSocket class where there is no global one',
    () => {
      expect(() => createRelayConnection({ ...base, WebSocket: undefined })).toThrow(
        expect.objectContaining({ code: 'no_websocket' }),
      );
    },
  );
});
