import { afterAll, beforeAll, describe } from 'vitest';
import { type AuthHarness, type HarnessOptions, startAuth } from './auth-harness.ts';
import { type DbTarget, dbTargets } from './databases.ts';

/**
 * One suite, run against every database target (native SQLite, sql.js, PostgreSQL, MariaDB):
 * a `describe` per target titled "<title> on <target>", with the real auth service on a fresh
 * database started before its tests and closed (database dropped) after. `suite` receives the
 * harness, whose members are there from the first test on. A target whose server cannot be
 * reached is a skipped `describe` that says why.
 */
export async function describeEachDatabase(
  title: string,
  options: HarnessOptions,
  suite: (h: AuthHarness, target: DbTarget) => void,
): Promise<void> {
  for (const target of await dbTargets()) {
    const name = target.skip
      ? `${title} on ${target.name}: skipped, ${target.skip}`
      : `${title} on ${target.name}`;
    describe.skipIf(target.skip !== undefined)(name, () => {
      // Filled in place in beforeAll, so that `suite` can close over it at collection time.
      const h = {} as AuthHarness;
      beforeAll(async () => {
        Object.assign(h, await startAuth(target, options));
      });
      afterAll(async () => {
        await h.close?.();
      });
      suite(h, target);
    });
  }
}
