/**
 * New pairing requests as tray notifications, without Electron: which requests to announce
 * (each once), what the notification says, and what Approve and Deny do. main.ts turns a
 * `PairingNotice` into a native notification and calls `runPairingChoice` from its buttons.
 */

import { AdminApiError } from '../renderer/admin-call.ts';
import type { AdminPairing, AdminUser } from '../server/admin/types.ts';
import type { TrayAdminApi } from './admin-client.ts';

/** How often the tray asks the host for pending pairings: the pairing poll interval. */
export const pairingWatchIntervalMs = 2_000;

export type PairingChoice = 'approve' | 'deny' | 'open';

/** One notification: a pending pairing and the account Approve adds the device to. */
export interface PairingNotice {
  code: string;
  title: string;
  body: string;
  /**
   * The account Approve adds the device to: the e-mail the device asked for, else the host's
   * owner. Undefined on a host without users: then the notification opens the admin UI, where
   * an e-mail is typed.
   */
  approveAs: string | undefined;
  /** The buttons, in order (macOS and Windows show them; elsewhere a click opens the UI). */
  actions: Array<{ choice: PairingChoice; label: string }>;
  /** The admin UI's fragment that highlights this request. */
  fragment: string;
}

/** The account a tray approval uses (see PairingNotice.approveAs). */
export function approveAsOf(
  pairing: AdminPairing,
  users: readonly AdminUser[],
): string | undefined {
  return pairing.email ?? users.find((u) => u.owner)?.email;
}

/** The notification of a pending pairing. */
export function pairingNotice(pairing: AdminPairing, approveAs: string | undefined): PairingNotice {
  const from = `Code ${pairing.code}, from ${pairing.clientAddress}.`;
  return {
    code: pairing.code,
    title: `"${pairing.deviceName}" (${pairing.platform}) asks to pair`,
    body:
      approveAs === undefined
        ? `${from} Open the admin UI to choose the account it joins.`
        : `${from} Approve adds it to ${approveAs}.`,
    approveAs,
    actions:
      approveAs === undefined
        ? [
            { choice: 'open', label: 'Open' },
            { choice: 'deny', label: 'Deny' },
          ]
        : [
            { choice: 'approve', label: 'Approve' },
            { choice: 'deny', label: 'Deny' },
          ],
    fragment: `pair=${pairing.code}`,
  };
}

export interface PairingChoiceDeps {
  api: TrayAdminApi;
  /** Opens the admin UI at a fragment (`pair=<code>`). */
  openDashboard(fragment: string): void;
}

/**
 * Carries out a button of a notice. Resolves with the line a follow-up notification shows (or
 * undefined when the admin UI was opened); a request approved, denied or expired meanwhile is
 * said so, not thrown.
 */
export async function runPairingChoice(
  choice: PairingChoice,
  notice: PairingNotice,
  deps: PairingChoiceDeps,
): Promise<string | undefined> {
  if (choice === 'open' || (choice === 'approve' && notice.approveAs === undefined)) {
    deps.openDashboard(notice.fragment);
    return undefined;
  }
  try {
    if (choice === 'deny') {
      await deps.api.denyPairing(notice.code);
      return `Denied: the device showing ${notice.code} was refused.`;
    }
    const { user } = await deps.api.approvePairing(notice.code, notice.approveAs);
    return `Approved: the device showing ${notice.code} joined ${user.email}.`;
  } catch (err: unknown) {
    if (err instanceof AdminApiError && err.code === 'not_found') {
      return `${notice.code} is no longer waiting (approved, denied or expired meanwhile).`;
    }
    throw err;
  }
}

export interface PairingWatchOptions {
  api: TrayAdminApi;
  /** A pending pairing not announced before. */
  onNew(notice: PairingNotice): void;
  /** A pairing announced before that is no longer pending (its notification can go). */
  onGone(code: string): void;
  /**
   * A failed look of the timer (host stopping, database down); the watch keeps going. Told once
   * per run of the same failure: again when the failure changes or after a look that worked.
   */
  onError(err: unknown): void;
  intervalMs?: number;
}

/**
 * Watches the host's pending pairings (the admin API, every `intervalMs`) and announces each
 * one once, from the first look on. `poll()` looks now (the timer calls it; tests too).
 */
export function createPairingWatch(options: PairingWatchOptions) {
  const announced = new Set<string>();
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  /** The message of the failure told last, while failures follow each other. */
  let failing: string | undefined;

  async function poll(): Promise<void> {
    const pending = await options.api.pairings();
    const codes = new Set(pending.map((p) => p.code));
    for (const code of announced) {
      if (codes.has(code)) continue;
      announced.delete(code);
      options.onGone(code);
    }
    const fresh = pending.filter((p) => !announced.has(p.code));
    if (fresh.length === 0) return;
    const users = fresh.some((p) => p.email === null) ? await options.api.users() : [];
    for (const pairing of fresh) {
      if (stopped) return;
      announced.add(pairing.code);
      options.onNew(pairingNotice(pairing, approveAsOf(pairing, users)));
    }
  }

  const loop = async (): Promise<void> => {
    try {
      await poll();
      failing = undefined;
    } catch (err: unknown) {
      const message = err instanceof Error ? err.message : String(err);
      if (message !== failing) options.onError(err);
      failing = message;
    }
    if (stopped) return;
    timer = setTimeout(() => void loop(), options.intervalMs ?? pairingWatchIntervalMs);
    timer.unref();
  };

  return {
    poll,
    /** Starts looking every interval (the first look at once). */
    start(): void {
      stopped = false;
      clearTimeout(timer);
      void loop();
    },
    stop(): void {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
