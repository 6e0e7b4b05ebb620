/** Subscription tiers, from least to most. */
export const tiers = ['free', 'personal', 'pro', 'team'] as const;
export type Tier = (typeof tiers)[number];

/** Synced projects a tier allows; null is unlimited. */
export const projectLimits: Readonly<Record<Tier, number | null>> = {
  free: 0,
  personal: 1,
  pro: null,
  team: null,
};

/** The tier in force: a subscription past its expiry counts as free. */
export function effectiveTier(tier: Tier, expiresAt: string | null, nowMs: number): Tier {
  return expiresAt !== null && Date.parse(expiresAt) <= nowMs ? 'free' : tier;
}
