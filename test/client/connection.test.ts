import { describe, expect, it } from 'vitest';
import { SyncError } from '../../client/errors.ts';
import {
  createRelayConnection,
  type WebSocketConstructor,
  type WebSocketLike,
} from '../../client/relay-connection.ts';

/** A socket that never opens: the connection stays in `connecting`, as while a relay is down. */
class PendingSocket implements WebSocketLike {
  static opened = 0;
  readyState = 0;
  onopen = null;
  onmessage = null;
  onclose: WebSocketLike['onclose'] = null;
  onerror = null;
  constructor(_url: string) {
    PendingSocket.opened++;
  }
  send(): void {
    throw new Error('not open');
  }
  close(code = 1000, reason = ''): void {
    this.onclose?.({ code, reason });
  }
}

const options = {
  url: 'ws://127.0.0.1:9',
  room: '1.abc.def',
  device: '2',
  token: '1:2:3.ab',
  WebSocket: PendingSocket as WebSocketConstructor,
};

describe('relay connection queue', () => {
  it('queues messages while not joined, up to the bound', async () => {
    const connection = createRelayConnection({ ...options, maxQueuedMessages: 3 });
    const joined = connection.connect();
    for (let n = 0; n < 3; n++) connection.broadcast({ n });
    expect(connection.queued).toBe(3);
    expect(() => connection.broadcast({ n: 3 })).toThrow(
      expect.objectContaining({ code: 'queue_full' }),
    );
    await connection.close();
    await expect(joined).rejects.toMatchObject({ code: 'closed' });
    expect(connection.state).toBe('closed');
    expect(() => connection.broadcast({ n: 4 })).toThrow(SyncError);
  });

  it('refuses payloads that are not objects, too big, or use the reserved key', () => {
    const connection = createRelayConnection({ ...options, maxMessageBytes: 100 });
    expect(() => connection.broadcast([] as unknown as Record<string, unknown>)).toThrow(
      /JSON object/,
    );
    expect(() => connection.broadcast({ text: 'x'.repeat(200) })).toThrow(
      expect.objectContaining({ code: 'message_too_big' }),
    );
    expect(() => connection.broadcast({ _sync: 1 })).toThrow(/reserved/);
  });

  it('does not open a socket before connect()', () => {
    const before = PendingSocket.opened;
    createRelayConnection(options).broadcast({ queued: true });
    expect(PendingSocket.opened).toBe(before);
  });
});
