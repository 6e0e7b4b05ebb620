import type { ColumnType, Generated, Insertable, Selectable } from 'kysely';

/**
 * Datetimes: ISO-8601 text on SQLite, native timestamp types on PostgreSQL (timestamptz) and
 * MySQL (DATETIME(3), UTC). Drivers hand back a string or a Date; `toIso` normalizes.
 */
export type DbDate = ColumnType<Date | string, Date | string | undefined, Date | string>;
/** Booleans: INTEGER 0/1 on SQLite, BOOLEAN on PostgreSQL, TINYINT(1) on MySQL. */
export type DbBool = ColumnType<boolean | number, boolean | number | undefined, boolean | number>;

export interface UsersTable {
  id: Generated<number>;
  email: string;
  createdAt: DbDate;
}

export interface DevicesTable {
  id: Generated<number>;
  userId: number;
  deviceName: string;
  platform: string;
  /** SHA-256 hex digest of the device token, never the token. */
  token: string;
  createdAt: DbDate;
  lastSeen: DbDate;
}

export interface MagicLinksTable {
  id: Generated<number>;
  email: string;
  /** SHA-256 hex digest of the link token, never the token. */
  token: string;
  expiresAt: DbDate;
  used: DbBool;
  createdAt: DbDate;
}

export interface ProjectsTable {
  id: Generated<number>;
  userId: number;
  projectKey: string;
  name: string;
  roomId: string;
  createdAt: DbDate;
}

export interface SubscriptionsTable {
  id: Generated<number>;
  userId: number;
  tier: string;
  expiresAt: ColumnType<
    Date | string | null,
    Date | string | null | undefined,
    Date | string | null
  >;
  createdAt: DbDate;
}

/** A pending, approved, denied or claimed pairing (a device joining by a short code). */
export interface PairingsTable {
  id: Generated<number>;
  /** SHA-256 hex digest of the pairingId the device polls with, never the id itself. */
  pairingId: string;
  /** The code shown on the device, normalized: 8 letters without the dash. */
  code: string;
  deviceName: string;
  platform: string;
  email: string | null;
  clientAddress: string;
  /** SHA-256 hex digest of the magic link sent with the pairing, when an e-mail was given. */
  linkToken: string | null;
  status: string;
  userId: number | null;
  deviceId: number | null;
  /** Unix seconds the device token was signed with; the token itself is never stored. */
  tokenIssuedAt: ColumnType<number | string | bigint | null, number | null, number | null>;
  approvedVia: string | null;
  approverName: string | null;
  createdAt: DbDate;
  expiresAt: DbDate;
}

/** A deleted device, in order of deletion: what relays of their own process follow. */
export interface RevocationsTable {
  /** The feed's sequence number. */
  id: Generated<number>;
  deviceId: number;
  userId: number;
  /** Unix second of the deletion. */
  revokedAt: ColumnType<number | string | bigint, number, number>;
  /** A removed membership: the project's room (null for a deleted device). */
  roomId: ColumnType<string | null, string | null | undefined, string | null>;
  /** A removed membership: its row id (null for a deleted device). */
  memberId: ColumnType<number | string | bigint | null, number | null | undefined, number | null>;
}

/** A user a project is shared with (teams): `editor` or `viewer`. */
export interface ProjectMembersTable {
  /** Replaced on a role change: the room grant names it. */
  id: Generated<number>;
  projectId: number;
  userId: number;
  role: string;
  addedAt: DbDate;
}

export interface SchemaVersionTable {
  version: number;
  name: string;
  appliedAt: DbDate;
}

export interface Database {
  users: UsersTable;
  devices: DevicesTable;
  magic_links: MagicLinksTable;
  projects: ProjectsTable;
  subscriptions: SubscriptionsTable;
  pairings: PairingsTable;
  revocations: RevocationsTable;
  projectMembers: ProjectMembersTable;
  schemaVersion: SchemaVersionTable;
}

export type UserRow = Selectable<UsersTable>;
export type DeviceRow = Selectable<DevicesTable>;
export type ProjectRow = Selectable<ProjectsTable>;
export type SubscriptionRow = Selectable<SubscriptionsTable>;
export type MagicLinkRow = Selectable<MagicLinksTable>;
export type PairingRow = Selectable<PairingsTable>;
export type ProjectMemberRow = Selectable<ProjectMembersTable>;
export type NewDevice = Insertable<DevicesTable>;

/** A datetime read from any driver as an ISO-8601 UTC string. */
export function toIso(value: Date | string): string {
  if (value instanceof Date) return value.toISOString();
  // SQLite CURRENT_TIMESTAMP style 'YYYY-MM-DD HH:MM:SS' (UTC) from rows written by hand.
  const normalized = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}/.test(value)
    ? `${value.replace(' ', 'T')}Z`
    : value;
  return new Date(normalized).toISOString();
}
