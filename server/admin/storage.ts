import type { Db } from '../db/connect.ts';
import type { Host } from '../host.ts';
import { listUserSummaries, projectsByRoom } from './queries.ts';
import type { AdminStorage, AdminStorageProject, AdminStorageUser } from './types.ts';

/** Projects one page of the storage lists at most, and by default. */
export const maxStoragePage = 100;
export const defaultStoragePage = 50;

/** Which projects of the storage a request asks for (in the order `storageOf` lists them). */
export interface StoragePage {
  offset: number;
  limit: number;
}

/**
 * What the co-hosted relay's document store keeps, per user and project, with the names from
 * the auth database (`GET /admin/api/storage`): one page of its projects, users with the most
 * bytes first and within each user the projects with the most bytes first; a user's `bytes`
 * are all of its projects', also those on other pages. Folder reports come as summaries (the
 * number of names, not the names: `reportNames`).
 */
export async function storageOf(host: Host, db: Db, page: StoragePage): Promise<AdminStorage> {
  const relay = host.relay;
  const none = { bytes: 0, maxBytes: null, userMaxBytes: null, users: [] };
  const empty = { offset: page.offset, limit: page.limit, projects: 0 };
  if (relay === undefined) {
    return { state: host.relayPaused ? 'paused' : 'absent', ...none, page: empty };
  }
  if (relay.store === undefined) return { state: 'unavailable', ...none, page: empty };
  const usage = await relay.store.usage();
  const users = new Map<
    string,
    { user: AdminStorageUser; rooms: (typeof usage.rooms)[number][] }
  >();
  for (const kept of usage.rooms) {
    let found = users.get(kept.user);
    if (found === undefined) {
      const user = { userId: Number(kept.user), email: null, bytes: 0, projects: [] };
      found = { user, rooms: [] };
      users.set(kept.user, found);
    }
    found.user.bytes += kept.bytes;
    found.rooms.push(kept);
  }
  const ordered = [...users.values()].sort((a, b) => b.user.bytes - a.user.bytes);
  const rows = ordered.flatMap(({ user, rooms }) =>
    [...rooms].sort((a, b) => b.bytes - a.bytes).map((kept) => ({ user, kept })),
  );
  const shown = rows.slice(page.offset, page.offset + page.limit);
  const projects = await projectsByRoom(
    db,
    shown.map((row) => row.kept.room),
  );
  const emails = new Map((await listUserSummaries(db)).map((u) => [String(u.id), u.email]));
  const listed = new Map<AdminStorageUser, AdminStorageUser>();
  for (const { user, kept } of shown) {
    let out = listed.get(user);
    if (out === undefined) {
      out = { ...user, email: emails.get(String(user.userId)) ?? null, projects: [] };
      listed.set(user, out);
    }
    const project: AdminStorageProject = {
      room: kept.room,
      project: projects.get(kept.room) ?? null,
      documents: kept.documents,
      bytes: kept.bytes,
      chunks: kept.chunks,
      chunkBytes: kept.chunkBytes,
      folders: kept.folders.map(({ at, ...report }) => ({
        ...report,
        reportedAt: new Date(at).toISOString(),
      })),
    };
    out.projects.push(project);
  }
  return {
    state: 'running',
    bytes: usage.bytes,
    maxBytes: usage.bounds.maxBytes,
    userMaxBytes: usage.bounds.userMaxBytes,
    users: [...listed.values()],
    page: { offset: page.offset, limit: page.limit, projects: rows.length },
  };
}

/** The names of one folder's latest report; undefined when none is kept (or none named). */
export async function reportNames(
  host: Host,
  room: string,
  doc: string,
): Promise<string[] | undefined> {
  const store = host.relay?.store;
  if (store === undefined) return undefined;
  return store.chunks.reportNames(room, doc);
}
