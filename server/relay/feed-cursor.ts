import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, extname, join } from 'node:path';
import { z } from 'zod';
import type { Logger } from '../log.ts';

/**
 * Where a relay with `auth.url` resumes the auth service's revocation feed after a restart: a
 * small JSON file beside relay.db (`relay.db` → `relay-feed.json`), `{"authUrl","since"}`.
 * Kept out of relay.db so that it never waits behind (or rolls back with) a buffer write.
 */
export interface FeedCursor {
  /** The cursor saved for this `auth.url`; 0 when there is none (or it was saved for another). */
  read(): number;
  /** Saves the cursor (write aside, then rename); a failure is logged once and not fatal. */
  write(since: number): void;
}

const savedCursor = z.object({
  authUrl: z.string(),
  since: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
});

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The cursor file of the relay whose buffer is `sqlitePath`. */
export function feedCursorPath(sqlitePath: string): string {
  return join(dirname(sqlitePath), `${basename(sqlitePath, extname(sqlitePath))}-feed.json`);
}

export function openFeedCursor(sqlitePath: string, authUrl: string, logger: Logger): FeedCursor {
  const path = feedCursorPath(sqlitePath);
  let failing = false;
  let saved: number | undefined;
  return {
    read() {
      let text: string;
      try {
        text = readFileSync(path, 'utf8');
      } catch (err: unknown) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
          logger.warn({ err: String(err), path }, 'relay: cannot read the revocation feed cursor');
        }
        return 0;
      }
      const parsed = savedCursor.safeParse(parseJson(text));
      if (!parsed.success) {
        logger.warn(
          { path },
          'relay: the revocation feed cursor is damaged; reading the feed afresh',
        );
        return 0;
      }
      // Saved for another auth service: its sequence numbers mean nothing here.
      saved = parsed.data.authUrl === authUrl ? parsed.data.since : 0;
      return saved;
    },
    write(since) {
      if (since === saved) return;
      const tmp = `${path}.tmp`;
      let written = false;
      try {
        writeFileSync(tmp, `${JSON.stringify({ authUrl, since })}\n`, { mode: 0o600 });
        written = true;
        renameSync(tmp, path);
        saved = since;
        if (failing) logger.info({ path }, 'relay: the revocation feed cursor is saved again');
        failing = false;
      } catch (err: unknown) {
        // A file left aside by a failed rename would hold the space a later write needs.
        if (written) rmSync(tmp, { force: true });
        if (!failing) {
          logger.warn(
            { err: String(err), path },
            'relay: cannot save the revocation feed cursor; a restart resumes from the last one saved',
          );
        }
        failing = true;
      }
    },
  };
}
