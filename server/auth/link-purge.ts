import { purgeMagicLinks } from '../db/magic-links.ts';
import { type Purge, type PurgeOptions, schedulePurge } from './purges.ts';

/**
 * How long a link is kept after it expired, so that using it still answers `token_expired`
 * rather than `invalid_token` for a day.
 */
export const expiredLinkRetentionMs = 24 * 60 * 60_000;

export type LinkPurge = Purge;

/** Deletes magic links expired more than expiredLinkRetentionMs ago, on a schedule. */
export function startLinkPurge(options: PurgeOptions): LinkPurge {
  return schedulePurge(
    'expired magic links',
    (db, nowMs) => purgeMagicLinks(db, new Date(nowMs - expiredLinkRetentionMs)),
    options,
  );
}
