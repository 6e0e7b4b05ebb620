import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { SqliteDocumentStore } from '../../server/store/sqlite-store.ts';
import { history } from '../helpers/store-factories.ts';

/**
 * The bytes the store's bounds count (documents, chunks and folder reports of store.db, one
 * owner for all) against the rows themselves: random appends, chunk puts (some past a bound,
 * some of a chunk held already), folder reports (new, replacing a larger or a smaller one, some
 * past a bound), drops, deletions of rooms and users and compactions; after every step the
 * counts per user and in all equal a recount of the rows, and no user is left at zero or below.
 */

const runs = Number(process.env.BYTE_COUNT_RUNS ?? 40);
const user = fc.constantFrom('u1', 'u2', 'u3');
const room = fc.tuple(user, fc.constantFrom('a', 'b')).map(([u, r]) => `${u}.${r}.sig`);
const chunkId = fc.constantFrom('c1', 'c2', 'c3', 'c4');

type Step =
  | { op: 'append'; room: string; doc: string; size: number }
  | { op: 'put'; room: string; id: string; size: number }
  | { op: 'drop'; room: string; id: string }
  | { op: 'report'; room: string; doc: string; names: number; encrypted: boolean }
  | { op: 'deleteRoom'; room: string }
  | { op: 'deleteUser'; user: string }
  | { op: 'compact' };

const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('append' as const),
      room,
      doc: fc.constantFrom('x', 'y'),
      size: fc.integer({ min: 1, max: 300 }),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('put' as const),
      room,
      id: chunkId,
      size: fc.integer({ min: 1, max: 400 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('drop' as const), room, id: chunkId }) },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('report' as const),
      room,
      doc: fc.constantFrom('f1', 'f2'),
      names: fc.integer({ min: 0, max: 60 }),
      encrypted: fc.boolean(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('deleteRoom' as const), room }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('deleteUser' as const), user }) },
  { weight: 1, arbitrary: fc.constant({ op: 'compact' as const }) },
);

/** The bytes per user as the rows of store.db hold them. */
function rowsByUser(path: string): Map<string, number> {
  const db = new BetterSqlite3(path, { readonly: true });
  try {
    const rows = db
      .prepare<[], { user: string; bytes: number }>(
        `SELECT user, sum(bytes) AS bytes FROM (
          SELECT user, bytes FROM documents UNION ALL SELECT user, bytes FROM chunks
          UNION ALL SELECT user, counted AS bytes FROM folderReports
        ) GROUP BY user HAVING sum(bytes) > 0`,
      )
      .all();
    return new Map(rows.map((row) => [row.user, row.bytes]));
  } finally {
    db.close();
  }
}

describe('the store bounds’ byte counts', () => {
  const base = mkdtempSync(join(tmpdir(), 'byte-counts-'));
  afterAll(() => rmSync(base, { recursive: true, force: true }));
  let count = 0;

  it('equal the rows after any sequence of appends, puts, reports, drops, deletions and compactions', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 40 }), async (steps) => {
        count += 1;
        const path = join(base, String(count), 'store.db');
        let now = 1_767_225_600_000;
        const store = new SqliteDocumentStore({
          path,
          bounds: { userMaxBytes: 3_000, maxBytes: 7_000 },
          history,
          now: () => now,
        });
        try {
          for (const s of steps) {
            now += 60_000;
            if (s.op === 'append')
              await store.append({
                room: s.room,
                doc: s.doc,
                device: '1',
                data: Buffer.alloc(s.size, 7),
              });
            else if (s.op === 'put')
              await store.chunks.put({
                room: s.room,
                kc: '',
                id: s.id,
                data: Buffer.alloc(s.size, 5),
              });
            else if (s.op === 'drop') await store.chunks.drop(s.room, '', s.id);
            else if (s.op === 'report')
              await store.chunks.report({
                room: s.room,
                doc: s.doc,
                device: '1',
                files: s.names,
                bytes: 100,
                encrypted: s.encrypted,
                names: Array.from({ length: s.names }, (_, i) => `folder/${i}.txt`),
                at: now,
              });
            else if (s.op === 'deleteRoom') await store.deleteRoom(s.room);
            else if (s.op === 'deleteUser') await store.deleteUser(s.user);
            else await store.compact(now);
            const counted = store.countedBytes();
            expect(counted, JSON.stringify(s)).toEqual(rowsByUser(path));
            expect(store.bytes()).toBe([...counted.values()].reduce((a, b) => a + b, 0));
          }
        } finally {
          await store.close();
        }
      }),
      { numRuns: runs },
    );
  }, 120_000);
});
