import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../server/db/connect.ts';
import { migrate } from '../../server/db/migrate.ts';
import { findOrCreateUser, findUserByEmail } from '../../server/db/users.ts';
import { captureLogger } from '../helpers/capture.ts';

const dbFile = () => join(mkdtempSync(join(tmpdir(), 'synchost-sqlite-')), 'auth.db');

describe('embedded SQLite engines', () => {
  it('falls back to sql.js with a warning when the native module cannot load, on the same file', async () => {
    const path = dbFile();
    const broken = join(mkdtempSync(join(tmpdir(), 'synchost-addon-')), 'better_sqlite3.node');
    writeFileSync(broken, 'not a shared object');
    const { logger, lines } = captureLogger();
    const db = await openDatabase(
      { driver: 'sqlite', path },
      { logger, sqliteNativeBinding: broken },
    );
    expect(db.engine).toBe('sql.js');
    expect(
      lines.some((l) => l.includes('"level":"warn"') && l.includes('falling back to sql.js')),
    ).toBe(true);
    await migrate(db);
    await findOrCreateUser(db, 'wasm@example.com', 'free', new Date());
    await db.close();

    const native = await openDatabase({ driver: 'sqlite', path }, { logger });
    expect(native.engine).toBe('better-sqlite3');
    expect(await migrate(native)).toEqual([]);
    expect((await findUserByEmail(native, 'wasm@example.com'))?.email).toBe('wasm@example.com');
    await findOrCreateUser(native, 'native@example.com', 'free', new Date());
    await native.close();

    const again = await openDatabase({ driver: 'sqlite', path }, { logger, sqliteEngine: 'wasm' });
    expect(again.engine).toBe('sql.js');
    expect((await findUserByEmail(again, 'native@example.com'))?.email).toBe('native@example.com');
    await again.close();
  });

  it('keeps every committed sql.js write on disk without a clean close', async () => {
    const path = dbFile();
    const { logger } = captureLogger();
    const db = await openDatabase({ driver: 'sqlite', path }, { logger, sqliteEngine: 'wasm' });
    await migrate(db);
    await findOrCreateUser(db, 'kept@example.com', 'pro', new Date());
    // No close: a second engine reads the file as it is on disk right now.
    const reader = await openDatabase({ driver: 'sqlite', path }, { logger });
    expect((await findUserByEmail(reader, 'kept@example.com'))?.email).toBe('kept@example.com');
    await reader.close();
    await db.close();
  });

  it('refuses a non-native-load error (an unopenable path) instead of hiding it behind the fallback', async () => {
    const { logger } = captureLogger();
    const path = join(mkdtempSync(join(tmpdir(), 'synchost-sqlite-')), 'auth.db');
    writeFileSync(path, 'this is not a database file, definitely not one, no sir');
    await expect(openDatabase({ driver: 'sqlite', path }, { logger })).rejects.toThrow(
      /not a database/,
    );
  });
});
