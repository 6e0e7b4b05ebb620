import type { Tier } from '../../protocol/tiers.ts';
import { setSubscription } from '../../server/db/users.ts';
import type { AuthHarness } from '../helpers/auth-harness.ts';

/** Rate limits high enough that the auth API suites never meet them. */
export const roomyLimits = {
  linksPerClient: { points: 10_000, seconds: 900 },
  verifiesPerClient: { points: 10_000, seconds: 900 },
  authFailuresPerClient: { points: 10_000, seconds: 900 },
};

let emailCounter = 0;

/** An address no other test of the run uses. */
export const freshEmail = () => `user${++emailCounter}-${Date.now()}@example.com`;

/** The `error.code` of an error answer. */
export async function errorCode(res: Response): Promise<string> {
  const body = (await res.json()) as { error?: { code?: string } };
  return body.error?.code ?? `(no error code, status ${res.status})`;
}

/** Sets a user's subscription directly in the database of `h`, at the harness clock. */
export const tierSetter =
  (h: AuthHarness) =>
  (userId: number, tier: Tier, expiresAt: Date | null = null): Promise<void> =>
    setSubscription(h.server.db, userId, tier, expiresAt, new Date(h.clock.now));
