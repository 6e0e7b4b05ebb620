import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { createAuthServer } from '../../server/auth/index.ts';
import { type AuthHarness, startAuth } from '../helpers/auth-harness.ts';
import { captureLogger } from '../helpers/capture.ts';
import { dbTargets } from '../helpers/databases.ts';
import { mountDisk, tmpfsUnavailable } from '../helpers/tmpfs.ts';

/**
 * The embedded database on a disk that fills up or turns read-only under the running service.
 * A tiny tmpfs is mounted for each case (needs root; skipped with the reason otherwise).
 */
const targets = (await dbTargets()).filter((t) => t.name === 'sqlite' || t.name === 'sqlite-wasm');

const skip = tmpfsUnavailable();

/** Writes of several kinds; every answer must be a success or 503 `unavailable`. */
async function writes(h: AuthHarness, token: string, tag: string): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < 6; i++) {
    const answers = [
      await h.request('POST', '/auth/magic-link', { body: { email: `${tag}${i}@example.com` } }),
      await h.request('POST', '/auth/project', {
        token,
        body: { projectKey: `${tag}-${i}`, name: 'x'.repeat(200) },
      }),
    ];
    for (const res of answers) {
      const text = await res.text();
      statuses.push(res.status);
      if (res.status !== 503) continue;
      expect(JSON.parse(text)).toEqual({
        error: { code: 'unavailable', message: expect.any(String) },
      });
    }
  }
  return statuses;
}

function integrity(path: string): { check: string; users: number } {
  const db = new Database(path, { readonly: true });
  try {
    const check = (db.prepare('PRAGMA integrity_check').get() as { integrity_check: string })
      .integrity_check;
    const users = (db.prepare('select count(*) as n from users').get() as { n: number }).n;
    return { check, users };
  } finally {
    db.close();
  }
}

for (const target of targets) {
  describe.skipIf(skip !== undefined)(
    `SQLite (${target.name}) on a full or read-only disk${skip ? `: skipped, ${skip}` : ''}`,
    () => {
      it('answers 503 on a full disk, keeps serving reads, recovers when space is back, no corruption', async () => {
        const disk = mountDisk(1024);
        const path = join(disk.dir, 'auth.db');
        let h: AuthHarness | undefined;
        try {
          h = await startAuth(target, {
            conf: { DEFAULT_TIER: 'pro' },
            limits: {
              linksPerEmail: { points: 1000, seconds: 60 },
              linksPerClient: { points: 1000, seconds: 60 },
            },
            mapDb: () => ({ driver: 'sqlite', path }),
          });
          const me = await h.signIn('disk@example.com');
          expect((await writes(h, me.deviceToken, 'before')).every((s) => s < 300)).toBe(true);

          disk.fill();
          const full = await writes(h, me.deviceToken, 'full');
          expect(
            full.every((s) => s < 300 || s === 503),
            `${full} ${h.logs.slice(-2).join('\n')}`,
          ).toBe(true);
          expect(full).toContain(503);
          expect((await h.request('GET', '/auth/device', { token: me.deviceToken })).status).toBe(
            200,
          );
          expect(h.logs.some((l) => l.includes('unhandled error'))).toBe(false);
          expect(h.logs.some((l) => l.includes('database unavailable'))).toBe(true);

          disk.free();
          const after = await writes(h, me.deviceToken, 'after');
          expect(
            after.every((s) => s < 300),
            `${after} ${h.logs.slice(-2).join('\n')}`,
          ).toBe(true);
          await h.close();
          h = undefined;
          expect(integrity(path)).toEqual({ check: 'ok', users: 1 });
        } finally {
          await h?.close();
          disk.unmount();
        }
      }, 30_000);

      it('refuses to start on a read-only disk with one message naming the file, and keeps it intact', async () => {
        const disk = mountDisk(4096);
        const path = join(disk.dir, 'auth.db');
        let h: AuthHarness | undefined;
        try {
          h = await startAuth(target, { mapDb: () => ({ driver: 'sqlite', path }) });
          await h.signIn('ro@example.com');
          const config = h.config;
          await h.close();
          h = undefined;
          disk.readOnly(true);
          const { logger } = captureLogger();
          const started = createAuthServer({
            config,
            secret: 'test-secret-0123456789abcdef',
            logger,
            print: () => {},
            sqliteEngine: target.name === 'sqlite-wasm' ? 'wasm' : 'native',
          });
          await expect(started).rejects.toThrow(
            `cannot open the SQLite database ${path}: its folder is not writable (read-only file system)`,
          );
          disk.readOnly(false);
          expect(integrity(path)).toEqual({ check: 'ok', users: 1 });
        } finally {
          await h?.close();
          disk.unmount();
        }
      }, 30_000);
    },
  );
}
