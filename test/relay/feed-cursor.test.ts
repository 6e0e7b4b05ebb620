import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { feedCursorPath, openFeedCursor } from '../../server/relay/feed-cursor.ts';
import { captureLogger } from '../helpers/capture.ts';

const root = mkdtempSync(join(tmpdir(), 'sync-host-cursor-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
const fresh = () => {
  const dir = join(root, String(++dirs));
  mkdirSync(dir);
  return join(dir, 'relay.db');
};

describe('the revocation feed cursor beside relay.db', () => {
  it('reads back what it saved, for the same auth.url only', () => {
    const db = fresh();
    const { logger } = captureLogger();
    expect(feedCursorPath(db)).toBe(join(db, '..', 'relay-feed.json'));
    const cursor = openFeedCursor(db, 'http://auth:8080', logger);
    expect(cursor.read()).toBe(0);
    cursor.write(42);
    expect(JSON.parse(readFileSync(feedCursorPath(db), 'utf8'))).toEqual({
      authUrl: 'http://auth:8080',
      since: 42,
    });
    expect(openFeedCursor(db, 'http://auth:8080', logger).read()).toBe(42);
    // Another auth service numbers its deletions its own way.
    expect(openFeedCursor(db, 'http://other:8080', logger).read()).toBe(0);
  });

  it('starts from 0 with one warning when the file is damaged', () => {
    const db = fresh();
    const { logger, lines } = captureLogger();
    for (const text of ['{"authUrl":"http://auth:8080","since":', '{"since":-1}', '']) {
      writeFileSync(feedCursorPath(db), text);
      expect(openFeedCursor(db, 'http://auth:8080', logger).read()).toBe(0);
    }
    expect(lines.filter((line) => line.includes('cursor is damaged'))).toHaveLength(3);
  });

  it('keeps running when it cannot save, says so once, and says when it can again', () => {
    const db = fresh();
    const { logger, lines } = captureLogger();
    const cursor = openFeedCursor(db, 'http://auth:8080', logger);
    // A directory where the file is written aside: every write fails (also for root).
    const aside = `${feedCursorPath(db)}.tmp`;
    mkdirSync(aside);
    cursor.write(1);
    cursor.write(2);
    expect(lines.filter((line) => line.includes('cannot save'))).toHaveLength(1);
    rmSync(aside, { recursive: true });
    cursor.write(3);
    expect(lines.filter((line) => line.includes('saved again'))).toHaveLength(1);
    expect(openFeedCursor(db, 'http://auth:8080', logger).read()).toBe(3);
  });
});
