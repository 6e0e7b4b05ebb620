import type { Db } from '../db/connect.ts';

/**
 * Which relay rooms still belong to a project: the document store forgets the documents of the
 * others (a deleted project, or a deleted user's projects).
 */
export interface RoomDirectory {
  /**
   * The rooms among `rooms` whose project exists; undefined when the answer cannot be trusted to
   * delete anything (an auth database with no user at all: a new or replaced database). Rejects
   * when the auth side cannot be asked now.
   */
  existing(rooms: readonly string[]): Promise<Set<string> | undefined>;
}

/** Room ids per query: well below the bound-parameter limits of SQLite, PostgreSQL and MySQL. */
const roomsPerQuery = 500;

/** The directory of an auth database (co-hosted: the relay reads it directly). */
export function authDatabaseRooms(db: () => Db | undefined): RoomDirectory {
  return {
    async existing(rooms) {
      const database = db();
      if (database === undefined) throw new Error('the auth database is not open yet');
      const anyUser = await database.kysely.selectFrom('users').select('id').limit(1).execute();
      if (anyUser.length === 0) return undefined;
      const found = new Set<string>();
      for (let i = 0; i < rooms.length; i += roomsPerQuery) {
        const rows = await database.kysely
          .selectFrom('projects')
          .select('roomId')
          .where('roomId', 'in', rooms.slice(i, i + roomsPerQuery))
          .execute();
        for (const row of rows) found.add(row.roomId);
      }
      return found;
    },
  };
}
