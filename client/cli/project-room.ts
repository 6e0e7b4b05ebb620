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

/** A project's name that no other can take: `<owner-email>/<key>`. */
export function qualifiedName(project: Project): string {
  return project.owner === undefined
    ? project.projectKey
    : `${project.owner.email}/${project.projectKey}`;
}

/**
 * The project a name means among those the user reaches (its own and those shared with it): its
 * key where only one has that key, else `<owner-email>/<key>`. Several: a usage error listing
 * their full names; none: `not_found` saying how to register it.
 */
export function pickProject(projects: readonly Project[], name: string): Project {
  const found = projects.filter((p) => p.projectKey === name || qualifiedName(p) === name);
  if (found.length === 1) return found[0] as Project;
  if (found.length > 1) {
    const names = found.map((p) => `"${qualifiedName(p)}"`).join(', ');
    throw new UsageError(
      `"${name}" names more than one project (${names}): name it as <owner-email>/<key>`,
    );
  }
  throw new SyncError(
    'not_found',
    `no project with key "${name}": register it with sync-host project add "${name}" <name>`,
  );
}

/** Who a device of a project is: its user's e-mail, its name, and its user's role. */
export interface DeviceOwner {
  email: string;
  deviceName: string;
  role: 'owner' | 'editor' | 'viewer';
}

/**
 * The devices of a project's owner and members by device id (from its members endpoint); empty
 * when the auth service does not answer. Device names have one space at most in a row (lines
 * that show them part their columns by two).
 */
export async function projectDevices(
  auth: AuthClient,
  projectId: number,
): Promise<Map<string, DeviceOwner>> {
  const devices = new Map<string, DeviceOwner>();
  const answer = await auth.members(projectId).catch(() => undefined);
  if (answer === undefined) return devices;
  const users = new Map<number, { email: string; role: DeviceOwner['role'] }>([
    [answer.owner.userId, { email: answer.owner.email, role: 'owner' }],
    ...answer.members.map((m): [number, { email: string; role: DeviceOwner['role'] }] => [
      m.userId,
      { email: m.email, role: m.role },
    ]),
  ]);
  for (const device of answer.devices ?? []) {
    const user = users.get(device.userId);
    if (user === undefined) continue;
    devices.set(String(device.id), {
      ...user,
      deviceName: device.deviceName.replace(/\s+/g, ' '),
    });
  }
  return devices;
}

/**
 * The name a project's local files go by (its sync's state log and control socket): its key for
 * the user's own project, `<owner-email>/<key>` for a shared one, whichever name the user typed.
 */
export function localName(project: Project): string {
  return project.role === undefined || project.role === 'owner'
    ? project.projectKey
    : qualifiedName(project);
}

/**
 * `localName` of the project `name` means; the name itself when the auth service cannot say
 * or knows no such project (a running sync is then found by the name it was started with).
 */
export async function localNameOf(ctx: Context, name: string): Promise<string> {
  const { auth } = await signedIn(ctx);
  try {
    return localName(await findProject(auth, name));
  } catch (err: unknown) {
    // unknown, or the auth service out of reach: the name as typed (an ambiguous one is refused)
    if (err instanceof SyncError) return name;
    throw err;
  }
}

/** The project a name means for this user (`pickProject`). */
export async function findProject(auth: AuthClient, name: string): Promise<Project> {
  return pickProject(await auth.projects(), name);
}

/**
 * Set to `1`: chunks go in text frames with base64 data (`binaryChunks: false`), for a host from
 * before binary frames.
 */
export const textChunksVariable = 'SYNC_HOST_TEXT_CHUNKS';

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
      ...(project.grant === undefined ? {} : { grant: project.grant }),
      WebSocket: socketClass,
      binaryChunks: ctx.env[textChunksVariable] !== '1',
    });
  return { open, authUrl, project, auth };
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
