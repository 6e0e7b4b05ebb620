import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SyncError } from '../../client/errors.ts';
import type { YjsProvider } from '../../client/yjs-provider.ts';
import { startTestHost, type TestHost } from '../helpers/host.ts';
import { eventually } from '../helpers/wait.ts';
import { converged, openYjsRoom, type YjsRoom } from './yjs-room.ts';

/** A host whose store takes a few KiB per user: the devices fill it at once. */
describe('the Yjs provider when the host’s store is full', () => {
  let th: TestHost;
  let room: YjsRoom;

  beforeAll(async () => {
    th = await startTestHost({ ui: false, relay: ['store.userMaxBytes=6000'] });
    room = await openYjsRoom(th, 'full@example.org', 'full', 3);
  });

  afterAll(async () => {
    await room?.close();
    await th?.close();
  });

  function errorsOf(provider: YjsProvider): SyncError[] {
    const errors: SyncError[] = [];
    provider.on('error', (error) => errors.push(error));
    return errors;
  }

  it('says so once, keeps online devices in step and loses nothing', async () => {
    const a = await room.provider(0, { name: 'big' });
    const b = await room.provider(1, { name: 'big' });
    const errors = { a: errorsOf(a), b: errorsOf(b) };
    await Promise.all([a.whenSynced(), b.whenSynced()]);
    const text = a.doc.getText('text');
    for (let i = 0; i < 30; i += 1) {
      text.insert(text.length, `${String(i).padStart(3, '0')}${'x'.repeat(397)}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(await converged([a, b])).toHaveLength(30 * 400);
    await eventually(() => errors.a.some((e) => e.code === 'store_full'), 'store_full at A');
    expect(errors.a.filter((e) => e.code === 'store_full')).toHaveLength(1);
    expect(errors.a[0]?.message).toMatch(/the host is full/);
    expect(a.synced && b.synced).toBe(true);
    // A device that comes while A is online gets everything from it, the host being full.
    const c = await room.provider(2, { name: 'big' });
    await c.whenSynced();
    expect(await converged([a, c])).toHaveLength(30 * 400);
    // B's edits still reach the others live.
    b.doc.getText('text').insert(0, 'from B. ');
    expect(await converged([a, b, c])).toMatch(/^from B\. 000x/);
  }, 30_000);
});
