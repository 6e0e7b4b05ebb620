import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  expiredLinkRetentionMs,
  type LinkPurge,
  startLinkPurge,
} from '../../server/auth/link-purge.ts';
import { type Db, openDatabase } from '../../server/db/connect.ts';
import { createMagicLink, findMagicLink } from '../../server/db/magic-links.ts';
import { migrate } from '../../server/db/migrate.ts';
import { captureLogger } from '../helpers/capture.ts';
import { dbTargets } from '../helpers/databases.ts';
import { eventually } from '../helpers/wait.ts';

const targets = await dbTargets();
const minute = 60_000;
const nowMs = Date.parse('2030-01-02T03:04:05Z');

for (const target of targets) {
  const title = target.skip
    ? `expired magic links on ${target.name}: skipped, ${target.skip}`
    : `expired magic links on ${target.name}`;
  describe.skipIf(target.skip !== undefined)(title, () => {
    const dir = mkdtempSync(join(tmpdir(), 'link-purge-'));
    let db: Db;
    let drop: () => Promise<void>;
    let purge: LinkPurge | undefined;
    const capture = captureLogger('info');
    beforeAll(async () => {
      const created = await target.create(dir);
      drop = created.drop;
      db = await openDatabase(created.config, {
        logger: capture.logger,
        sqliteEngine: created.sqliteEngine,
      });
      await migrate(db);
    });
    afterAll(async () => {
      purge?.stop();
      await db?.close();
      await drop?.();
      rmSync(dir, { recursive: true, force: true });
    });

    /** A link that expires `expiresInMs` after the injected now (negative: already expired). */
    const link = async (token: string, expiresInMs: number) =>
      createMagicLink(
        db,
        `${token}@example.com`,
        token,
        new Date(nowMs + expiresInMs - 15 * minute),
        new Date(nowMs + expiresInMs),
      );

    it('deletes links expired more than a day ago on its schedule, and keeps the others', async () => {
      await link('long-expired', -expiredLinkRetentionMs - minute);
      await link('just-expired', -minute);
      await link('valid', 10 * minute);
      purge = startLinkPurge({ db, logger: capture.logger, now: () => nowMs, intervalMs: 50 });
      await eventually(
        async () => ((await findMagicLink(db, 'long-expired')) === undefined ? true : undefined),
        'the long-expired link to be deleted',
      );
      // said once the delete has returned, a moment after the row is gone
      await eventually(
        () => capture.lines.some((l) => l.includes('"expired magic links deleted"')) || undefined,
        'the purge said',
      );
      // An expired link is kept a day so that using it still answers token_expired.
      expect(await findMagicLink(db, 'just-expired')).toMatchObject({ used: false });
      expect(await findMagicLink(db, 'valid')).toMatchObject({ used: false });
      expect(await purge.run()).toBe(0);
    });
  });
}
