import type { Db } from '../db/connect.ts';
import type { Host } from '../host.ts';
import { listUserSummaries, projectsByRoom } from './queries.ts';
import type { AdminStorage, AdminStorageUser } from './types.ts';

/**
 * What the co-hosted relay's document store keeps, per user and project, with the names from
 * the auth database (`GET /admin/api/storage`). Users with the most bytes first.
 */
export async function storageOf(host: Host, db: Db): Promise<AdminStorage> {
  const relay = host.relay;
  const none = { bytes: 0, maxBytes: null, userMaxBytes: null, users: [] };
  if (relay === undefined) return { state: host.relayPaused ? 'paused' : 'absent', ...none };
  if (relay.store === undefined) return { state: 'unavailable', ...none };
  const usage = await relay.store.usage();
  const projects = await projectsByRoom(
    db,
    usage.rooms.map((r) => r.room),
  );
  const emails = new Map((await listUserSummaries(db)).map((u) => [String(u.id), u.email]));
  const users = new Map<string, AdminStorageUser>();
  for (const kept of usage.rooms) {
    let user = users.get(kept.user);
    if (user === undefined) {
      user = {
        userId: Number(kept.user),
        email: emails.get(kept.user) ?? null,
        bytes: 0,
        projects: [],
      };
      users.set(kept.user, user);
    }
    user.bytes += kept.bytes;
    user.projects.push({
      room: kept.room,
      project: projects.get(kept.room) ?? null,
      documents: kept.documents,
      bytes: kept.bytes,
      chunks: kept.chunks,
      chunkBytes: kept.chunkBytes,
      folders: kept.folders.map(({ at, names, ...report }) => ({
        ...report,
        ...(report.encrypted || names === undefined ? {} : { names }),
        reportedAt: new Date(at).toISOString(),
      })),
    });
  }
  for (const user of users.values()) user.projects.sort((a, b) => b.bytes - a.bytes);
  return {
    state: 'running',
    bytes: usage.bytes,
    maxBytes: usage.bounds.maxBytes,
    userMaxBytes: usage.bounds.userMaxBytes,
    users: [...users.values()].sort((a, b) => b.bytes - a.bytes),
  };
}
