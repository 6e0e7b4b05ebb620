import { afterEach, describe, expect, it } from 'vitest';
import { createTrayAdminApi, type TrayAdminApi } from '../../electron/admin-client.ts';
import {
  createPairingWatch,
  type PairingNotice,
  runPairingChoice,
} from '../../electron/pairing-notices.ts';
import { AdminApiError } from '../../renderer/admin-call.ts';
import type { AdminDevice } from '../../server/admin/types.ts';
import { startTestHost, type TestHost } from '../helpers/host.ts';
import { eventually } from '../helpers/wait.ts';

let th: TestHost | undefined;
afterEach(async () => {
  await th?.close();
  th = undefined;
});

/** The host's clock runs `offset.ms` ahead, so a device may poll again without waiting 2 s. */
const offset = { ms: 0 };
const hostClock = () => Date.now() + offset.ms;

/** A device asking to pair, as `sync-host login` does: POST /auth/pair. */
async function requestPairing(base: string, deviceName: string, email?: string) {
  const res = await fetch(`${base}/auth/pair`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ deviceName, platform: 'linux', ...(email ? { email } : {}) }),
  });
  expect(res.status).toBe(201);
  return (await res.json()) as { pairingId: string; code: string };
}

/** The device's next poll, one interval later on the host's clock. */
async function devicePoll(base: string, pairingId: string) {
  offset.ms += 2_000;
  const res = await fetch(`${base}/auth/pair/${pairingId}`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** The tray's side: the watch over the real admin API, recording what it would show. */
function trayOf(host: TestHost) {
  const api = createTrayAdminApi(
    () => host.base,
    () => host.host.adminToken,
  );
  const shown: PairingNotice[] = [];
  const gone: string[] = [];
  const errors: unknown[] = [];
  const opened: string[] = [];
  const watch = createPairingWatch({
    api,
    onNew: (notice) => shown.push(notice),
    onGone: (code) => gone.push(code),
    onError: (err) => errors.push(err),
    intervalMs: 50,
  });
  const deps = { api, openDashboard: (fragment: string) => opened.push(fragment) };
  return { api, watch, shown, gone, errors, opened, deps };
}

/** Counts the watch's looks (calls of the pairings list), each still a real request. */
function countLooks(api: TrayAdminApi): { count: number } {
  const looks = { count: 0 };
  const pairings = api.pairings.bind(api);
  api.pairings = () => {
    looks.count++;
    return pairings();
  };
  return looks;
}

describe('tray notifications of pairing requests, against a real host', () => {
  it('announces a request once; with no user yet Approve opens the admin UI at it, Deny refuses it', async () => {
    offset.ms = 0;
    th = await startTestHost({ ui: false, now: hostClock });
    const tray = trayOf(th);
    const laptop = await requestPairing(th.base, 'laptop');

    await tray.watch.poll();
    await tray.watch.poll();
    expect(tray.shown).toEqual([
      {
        code: laptop.code,
        title: '"laptop" (linux) asks to pair',
        body: `Code ${laptop.code}, from 127.0.0.1. Open the admin UI to choose the account it joins.`,
        approveAs: undefined,
        actions: [
          { choice: 'open', label: 'Open' },
          { choice: 'deny', label: 'Deny' },
        ],
        fragment: `pair=${laptop.code}`,
      },
    ]);
    const [notice] = tray.shown as [PairingNotice];

    // No account to add it to: the admin UI opens at the request, which stays pending.
    expect(await runPairingChoice('approve', notice, tray.deps)).toBeUndefined();
    expect(await runPairingChoice('open', notice, tray.deps)).toBeUndefined();
    expect(tray.opened).toEqual([`pair=${laptop.code}`, `pair=${laptop.code}`]);
    expect((await tray.api.pairings()).map((p) => p.code)).toEqual([laptop.code]);
    expect((await devicePoll(th.base, laptop.pairingId)).status).toBe(202);

    expect(await runPairingChoice('deny', notice, tray.deps)).toBe(
      `Denied: the device showing ${laptop.code} was refused.`,
    );
    expect(await devicePoll(th.base, laptop.pairingId)).toMatchObject({
      status: 403,
      body: { error: { code: 'pair_denied' } },
    });
    await tray.watch.poll();
    expect(tray.gone).toEqual([laptop.code]);
    expect(tray.shown).toHaveLength(1);
    expect(tray.errors).toEqual([]);
  });

  it('Approve adds the device to the owner, or to the address the device gave; a request decided meanwhile is said so', async () => {
    offset.ms = 0;
    th = await startTestHost({ ui: false, now: hostClock });
    await th.signIn('owner@example.org', 'desktop');
    const tray = trayOf(th);
    const laptop = await requestPairing(th.base, 'laptop');
    const tablet = await requestPairing(th.base, 'tablet', 'kid@example.org');

    await tray.watch.poll();
    expect(tray.shown.map((n) => [n.code, n.approveAs, n.actions.map((a) => a.label)])).toEqual([
      [laptop.code, 'owner@example.org', ['Approve', 'Deny']],
      [tablet.code, 'kid@example.org', ['Approve', 'Deny']],
    ]);
    expect(tray.shown[0]?.body).toBe(
      `Code ${laptop.code}, from 127.0.0.1. Approve adds it to owner@example.org.`,
    );
    const [forLaptop, forTablet] = tray.shown as [PairingNotice, PairingNotice];

    expect(await runPairingChoice('approve', forLaptop, tray.deps)).toBe(
      `Approved: the device showing ${laptop.code} joined owner@example.org.`,
    );
    expect(await runPairingChoice('approve', forTablet, tray.deps)).toBe(
      `Approved: the device showing ${tablet.code} joined kid@example.org.`,
    );
    expect(await devicePoll(th.base, laptop.pairingId)).toMatchObject({
      status: 200,
      body: { status: 'approved', user: { email: 'owner@example.org' } },
    });
    const devices = ((await th.admin('GET', '/devices')).body as { devices: AdminDevice[] })
      .devices;
    expect(devices.map((d) => [d.deviceName, d.email]).sort()).toEqual([
      ['desktop', 'owner@example.org'],
      ['laptop', 'owner@example.org'],
      ['tablet', 'kid@example.org'],
    ]);

    // A second click on a stale notification adds nothing.
    expect(await runPairingChoice('approve', forLaptop, tray.deps)).toBe(
      `${laptop.code} is no longer waiting (approved, denied or expired meanwhile).`,
    );
    expect(await runPairingChoice('deny', forTablet, tray.deps)).toMatch(/is no longer waiting/);
    expect(
      ((await th.admin('GET', '/devices')).body as { devices: unknown[] }).devices,
    ).toHaveLength(3);
    await tray.watch.poll();
    expect(tray.gone.sort()).toEqual([laptop.code, tablet.code].sort());
    expect(tray.opened).toEqual([]);
  });

  it('watches on its own once started, and reports a host it cannot reach without stopping', async () => {
    offset.ms = 0;
    th = await startTestHost({ ui: false, now: hostClock });
    const tray = trayOf(th);
    const looks = countLooks(tray.api);
    tray.watch.start();
    try {
      const phone = await requestPairing(th.base, 'phone');
      await eventually(() => tray.shown.length === 1, 'the notice of the new request', 10_000);
      expect(tray.shown[0]?.code).toBe(phone.code);

      await th.close();
      th = undefined;
      const error = await eventually(() => tray.errors[0], 'an error from the watch', 10_000);
      expect(error).toBeInstanceOf(AdminApiError);
      expect(error).toMatchObject({ code: 'unreachable' });
      // Still looking, one look per interval, the same failure told once; nothing is announced.
      const failed = looks.count;
      await eventually(() => looks.count >= failed + 3, 'more looks after the failure', 10_000);
      expect(tray.errors).toHaveLength(1);
      expect(tray.shown).toHaveLength(1);
    } finally {
      tray.watch.stop();
    }
  });

  it('tells a failing look once per run of failures: again after a look that worked', async () => {
    th = await startTestHost({ ui: false });
    const host = th;
    const token = { value: 'f'.repeat(64) };
    const api = createTrayAdminApi(
      () => host.base,
      () => token.value,
    );
    const shown: PairingNotice[] = [];
    const errors: unknown[] = [];
    const watch = createPairingWatch({
      api,
      onNew: (n) => shown.push(n),
      onGone: () => {},
      onError: (err) => errors.push(err),
      intervalMs: 20,
    });
    await requestPairing(th.base, 'laptop');
    const looks = countLooks(api);
    watch.start();
    try {
      await eventually(() => (looks.count >= 5 ? true : undefined), 'five failed looks');
      expect(errors).toHaveLength(1);
      expect(errors[0]).toMatchObject({ status: 401 });

      token.value = host.host.adminToken;
      await eventually(() => (shown.length === 1 ? true : undefined), 'a look that worked');
      token.value = 'e'.repeat(64);
      const after = looks.count;
      await eventually(
        () => (looks.count >= after + 5 ? true : undefined),
        'five more failed looks',
      );
      expect(errors).toHaveLength(2);
    } finally {
      watch.stop();
    }
  });

  it('refuses the tray with a wrong admin token (401), announcing nothing', async () => {
    th = await startTestHost({ ui: false });
    await requestPairing(th.base, 'laptop');
    const host = th;
    const api = createTrayAdminApi(
      () => host.base,
      () => 'f'.repeat(64),
    );
    const shown: PairingNotice[] = [];
    const watch = createPairingWatch({
      api,
      onNew: (n) => shown.push(n),
      onGone: () => {},
      onError: () => {},
    });
    await expect(watch.poll()).rejects.toMatchObject({ status: 401, code: 'unauthorized' });
    expect(shown).toEqual([]);
  });
});
