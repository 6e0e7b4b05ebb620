import { type AuthClient, createAuthClient } from './auth-client.ts';
import type { DeviceDescription, Paired, PairingOffer, PairingStarted } from './auth-types.ts';
import { AuthServiceError, SyncError } from './errors.ts';

export interface PairOptions {
  /** The auth service, `http(s)://host:port`. */
  authUrl: string;
  /** What this device is registered as. */
  device: DeviceDescription;
  /**
   * The address to join as: the host also sends (or, without SMTP, prints) a sign-in link that
   * approves this pairing when opened. Without it, someone approves the code.
   */
  email?: string;
  /** Stops waiting: `pair()` rejects with a SyncError `aborted`. */
  signal?: AbortSignal;
  /** Default: the global `fetch`. */
  fetch?: typeof fetch;
  /** Called once with the code to show and the URL where it is approved. */
  onCode?(started: PairingStarted): void;
  /** Called after each poll that found the pairing still waiting. */
  onPending?(info: { polls: number; expiresAt: string }): void;
  /**
   * A signed-in device approved this one into its account: resolves true to join that account,
   * false to decline (then `pair()` rejects with `pair_denied`). Without it every such offer is
   * declined: a device must not join an account nobody looked at.
   */
  onOffer?(offer: PairingOffer): boolean | Promise<boolean>;
}

/** Waits `ms`, or rejects with `aborted` when the signal fires first. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(new SyncError('aborted', 'pairing was cancelled'));
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(new SyncError('aborted', 'pairing was cancelled'));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Signs this device in by pairing: starts a pairing, reports the code through `onCode`, polls
 * every `interval` seconds until someone approves or denies it or it expires. Resolves with the
 * device token (the caller stores it), the user it joined, and who approved it. A denial
 * rejects with AuthServiceError `pair_denied`, expiry with `token_expired`.
 */
export async function pair(options: PairOptions, auth?: AuthClient): Promise<Paired> {
  const client = auth ?? createAuthClient({ authUrl: options.authUrl, fetch: options.fetch });
  const { signal } = options;
  if (signal?.aborted) throw new SyncError('aborted', 'pairing was cancelled');
  const started = await client.startPairing(options.device, options.email);
  options.onCode?.(started);
  let waitSeconds = started.interval;
  let polls = 0;
  for (;;) {
    await pause(waitSeconds * 1000, signal);
    try {
      const answer = await client.pollPairing(started.pairingId);
      if (answer.status === 'approved') return answer;
      if (answer.status === 'confirm') {
        const accepted = (await options.onOffer?.(answer)) === true;
        await client.answerPairing(started.pairingId, accepted);
        if (!accepted)
          throw new AuthServiceError(
            'pair_denied',
            `declined: this device did not join the account ${answer.email}`,
            403,
          );
        continue;
      }
      polls += 1;
      options.onPending?.({ polls, expiresAt: started.expiresAt });
    } catch (err: unknown) {
      if (err instanceof AuthServiceError && err.code === 'rate_limited') {
        // Too fast (a slow network bunched two polls): wait longer, as RFC 8628's slow_down.
        waitSeconds = Math.max(waitSeconds, err.retryAfterSeconds ?? started.interval) + 1;
        continue;
      }
      // The host restarting or its database down for a moment: keep waiting until expiry.
      const passing =
        err instanceof SyncError && (err.code === 'unreachable' || err.code === 'unavailable');
      if (!passing || Date.parse(started.expiresAt) <= Date.now()) throw err;
    }
  }
}
