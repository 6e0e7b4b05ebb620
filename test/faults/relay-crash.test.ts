import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { createRoomId } from '../../server/tokens.ts';
import { writeLoopbackRelayConf } from '../helpers/configs.ts';
import { startHostProcess } from '../helpers/host-process.ts';
import { eventually } from '../helpers/wait.ts';
import { useCrashFixture } from './crash-fixture.ts';

const secret = 'crash-test-secret-0123456789abcdef';
const { dirs, processes, token, connect } = useCrashFixture(secret);

async function committed(statusUrl: string): Promise<number> {
  const text = await (await fetch(`${statusUrl}/metrics`)).text();
  return Number(/^relay_buffer_messages (\d+)$/m.exec(text)?.[1] ?? 0);
}

describe('relay killed with -9 while buffering under load', () => {
  it('delivers every message it had committed exactly once, in order, and the file passes integrity_check', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relay-crash-'));
    dirs.push(dir);
    writeLoopbackRelayConf(dir, secret, {
      'rate.perSecond': 100_000,
      'rate.burst': 100_000,
      'buffer.maxMessages': 1_000_000,
      'buffer.deviceMaxBytes': 1_000_000_000,
    });
    const room = createRoomId(1, secret);
    const relay = await startHostProcess(['relay'], dir);
    processes.push(relay);
    const url = await relay.url('relay');
    const statusUrl = await relay.url('status');
    const sender = connect(url);
    expect(await sender.join(room, 1, token(1, 1))).toMatchObject({ type: 'joined' });
    const absent = connect(url);
    expect(await absent.join(room, 2, token(1, 2))).toMatchObject({ type: 'joined' });
    await sender.next('presence');
    absent.terminate();
    await sender.take((f) => f.type === 'presence' && f.state === 'left');

    // Load: bursts of direct and broadcast messages for the absent device, no pause.
    let sent = 0;
    let seenCommitted = 0;
    let sending = true;
    const load = (async () => {
      while (sending && sender.closeInfo === undefined) {
        for (let i = 0; i < 200; i++) {
          sender.send({ to: sent % 3 === 0 ? 'broadcast' : 2, payload: { n: sent } });
          sent++;
        }
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();
    await eventually(
      async () => {
        seenCommitted = await committed(statusUrl);
        return seenCommitted > 3_000;
      },
      'thousands of committed messages',
      15_000,
    );
    expect(await relay.stop('SIGKILL')).toBeNull();
    sending = false;
    await load;

    const db = new Database(join(dir, 'relay.db'));
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    db.close();

    const again = await startHostProcess(['relay'], dir);
    processes.push(again);
    const back = connect(await again.url('relay'));
    const joined = await back.join(room, 2, token(1, 2));
    expect(joined).toMatchObject({ type: 'joined', gap: false });
    const buffered = joined.buffered as number;
    expect(buffered).toBeGreaterThanOrEqual(seenCommitted);
    expect(buffered).toBeLessThanOrEqual(sent);
    await eventually(() => back.allMessages().length >= buffered, 'the buffered messages', 15_000);
    await back.sync();
    const got = back.allMessages().map((m) => (m.payload as { n: number }).n);
    expect(got.length).toBe(buffered);
    expect(got).toEqual(Array.from({ length: buffered }, (_, i) => i));

    // Joining again finds nothing left: each message went to exactly one connection.
    await back.close();
    const twice = connect(await again.url('relay'));
    expect(await twice.join(room, 2, token(1, 2))).toMatchObject({ buffered: 0 });
  }, 60_000);
});
