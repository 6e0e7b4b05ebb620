import type { Tier } from '../../protocol/tiers.ts';
import type { PendingPairing } from '../auth/pairing.ts';

/**
 * Shapes the admin API answers with. The renderer imports these as types only, so the UI and
 * the API cannot drift apart.
 */

/** A user with subscription and counts (`GET /admin/api/users`). */
export interface AdminUser {
  id: number;
  email: string;
  createdAt: string;
  tier: Tier;
  /** The tier in force now: `free` once `expiresAt` has passed. */
  effectiveTier: Tier;
  expiresAt: string | null;
  deviceCount: number;
  projectCount: number;
  /** The host's owner: OWNER_EMAIL's user, else the first user. Always tier pro at creation. */
  owner: boolean;
}

/** A device of any user (`GET /admin/api/devices`); never its token. */
export interface AdminDevice {
  id: number;
  userId: number;
  email: string;
  deviceName: string;
  platform: string;
  createdAt: string;
  lastSeen: string;
  /** Whether the co-hosted relay has an open connection of this device now. */
  connected: boolean;
}

/** A project of any user (`GET /admin/api/projects`). */
export interface AdminProject {
  id: number;
  userId: number;
  /** The owner's e-mail. */
  email: string;
  projectKey: string;
  name: string;
  roomId: string;
  createdAt: string;
  /** The users it is shared with (teams), in the order they were added. */
  members: AdminMember[];
}

/** A user a project is shared with. */
export interface AdminMember {
  userId: number;
  email: string;
  role: 'editor' | 'viewer';
  addedAt: string;
}

/** A dev-mode login link that is neither used nor expired. */
export interface AdminPendingLink {
  email: string;
  link: string;
  createdAt: string;
  expiresAt: string;
}

/** A device waiting for approval (`GET /admin/api/pairings`), oldest first. */
export type AdminPairing = PendingPairing;

/** `GET /admin/api/pending-links`: `devMode` is false when SMTP is configured (then no links). */
export interface AdminPendingLinks {
  devMode: boolean;
  links: AdminPendingLink[];
}

/** `GET /admin/api/relay`: state `absent` when this process runs no relay (`sync-host auth`). */
export interface AdminRelay {
  state: 'running' | 'paused' | 'absent';
  rooms: number;
  connections: number;
  buffered: number;
  perRoom: AdminRoom[];
}

/** The project a relay room belongs to, with its user's e-mail (from the auth database). */
export interface AdminRoomProject {
  id: number;
  name: string;
  projectKey: string;
  email: string;
}

/**
 * A relay room with devices connected now. `project` is null when no project has this room id
 * (it was removed while its devices stayed connected, or the relay serves another auth host).
 */
export interface AdminRoom {
  room: string;
  connections: number;
  devices: string[];
  project: AdminRoomProject | null;
}

/** `GET /admin/api/connection`: what a client needs (its syncAuthUrl and syncRelayUrl). */
export interface AdminConnection {
  authUrl: string;
  relayUrl: string;
  statusUrl: string | null;
  version: string;
  /** Whether the host advertises itself on the LAN (mDNS), so clients can find it by themselves. */
  mdns: boolean;
  /** The certificate's fingerprint (SHA-256 of its public key, base64url); null without TLS. */
  fingerprint: string | null;
}

/**
 * `GET /admin/api/storage`: what the document store keeps, per user and project. `state`:
 * `running`; `paused` or `absent` (no relay in this process, or paused from the tray: nothing
 * to count); `unavailable` (a relay that keeps no documents, a cluster node).
 */
export interface AdminStorage {
  state: 'running' | 'paused' | 'absent' | 'unavailable';
  /** Bytes kept in all, counted against `maxBytes` (`store.maxBytes`). */
  bytes: number;
  maxBytes: number | null;
  /** `store.userMaxBytes`: each user's share. */
  userMaxBytes: number | null;
  /** The users of this page's projects, each with this page's projects only. */
  users: AdminStorageUser[];
  /** Which projects these are: from `offset`, at most `limit`, of `projects` in all. */
  page: { offset: number; limit: number; projects: number };
}

/**
 * One user's documents; `email` null once the user was deleted (removed at the next sweep).
 * `bytes`: all of the user's projects, those of other pages too.
 */
export interface AdminStorageUser {
  userId: number;
  email: string | null;
  bytes: number;
  projects: AdminStorageProject[];
}

/**
 * One project's documents and files' chunks; `project` null once the project was removed.
 * `bytes` counts both.
 */
export interface AdminStorageProject {
  room: string;
  project: AdminRoomProject | null;
  documents: number;
  bytes: number;
  /** Chunks of the project's files the host keeps, and their bytes. */
  chunks: number;
  chunkBytes: number;
  /** The latest count of each synced folder's files, as a device of the project reported it. */
  folders: AdminFolderReport[];
}

/** A synced folder's live files as its device last reported them. */
export interface AdminFolderReport {
  /** The folder document's key (a keyed digest when the project is encrypted). */
  doc: string;
  files: number;
  bytes: number;
  encrypted: boolean;
  /**
   * How many paths the report named (0 when the project is encrypted: the host never keeps
   * them); the paths themselves: `GET /admin/api/storage/names`.
   */
  named: number;
  /** The reporting device's id. */
  device: string;
  reportedAt: string;
}

/** `GET /admin/api/overview`: everything the UI shows, in one request. */
export interface AdminOverview {
  pending: AdminPendingLinks;
  pairings: AdminPairing[];
  users: AdminUser[];
  devices: AdminDevice[];
  projects: AdminProject[];
  relay: AdminRelay;
  storage: AdminStorage;
  connection: AdminConnection;
}
