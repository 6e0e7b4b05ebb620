import { WebSocket } from 'ws';
import type { AuthClient } from '../auth-client.ts';
import type { Project } from '../auth-types.ts';
import { SettingsError, SyncError } from '../errors.ts';
import { pinnedWebSocket } from '../pinning.ts';
import { createRelayConnection } from '../relay-connection.ts';
import { parseSettings } from '../settings.ts';
import { type Context, errorLine, signedIn, UsageError } from './context.ts';

async function relayUrl(ctx: Context, auth: AuthClient): Promise<string> {
  const url = ctx.flags.relay ?? (await auth.hostInfo()).relayUrl;
  try {
    return parseSettings({ syncRelayUrl: url }).syncRelayUrl;
  } catch (err: unknown) {
    if (err instanceof SettingsError) throw new UsageError(`relay URL ${errorLine(err)}`);
    throw err;
  }
}

/** The caller's project of a key, else `not_found` saying how to register it. */
export async function findProject(auth: AuthClient, key: string): Promise<Project> {
  const project = (await auth.projects()).find((p) => p.projectKey === key);
  if (project === undefined) {
    throw new SyncError(
      'not_found',
      `no project with key "${key}": register it with sync-host project add "${key}" <name>`,
    );
  }
  return project;
}

/**
 * The project's room as this device: `open()` makes a relay connection to it (not connected
 * yet), as often as needed. Looks the project and the relay up once.
 */
export async function roomOf(ctx: Context, projectKey: string) {
  const { auth, credential, authUrl } = await signedIn(ctx);
  const project = await findProject(auth, projectKey);
  const url = await relayUrl(ctx, auth);
  // A host pinned at login: the relay must show the same key (it shares the certificate).
  const socketClass =
    credential.fingerprint === undefined ? WebSocket : pinnedWebSocket(credential.fingerprint);
  const open = () =>
    createRelayConnection({
      url,
      room: project.roomId,
      device: String(credential.deviceId),
      token: credential.deviceToken,
      WebSocket: socketClass,
    });
  return { open, authUrl, project };
}

/** A relay connection to the project's room as this device (not connected yet). */
export async function openRoomOf(ctx: Context, projectKey: string) {
  const { open, authUrl } = await roomOf(ctx, projectKey);
  return { connection: open(), authUrl };
}

/** Resolves at SIGINT or SIGTERM. */
export function stopSignal(): Promise<'stopped'> {
  return new Promise((resolve) => {
    process.once('SIGINT', () => resolve('stopped'));
    process.once('SIGTERM', () => resolve('stopped'));
  });
}
