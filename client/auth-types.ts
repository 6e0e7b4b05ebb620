import { z } from 'zod';

/** Answers of the auth service (contract section 4), validated when they arrive. */

const timestamp = z.string();

export const userSchema = z.object({ id: z.number(), email: z.string(), createdAt: timestamp });
export const deviceSchema = z.object({
  id: z.number(),
  userId: z.number(),
  deviceName: z.string(),
  platform: z.string(),
  createdAt: timestamp,
  lastSeen: timestamp.nullable(),
});
export const projectSchema = z.object({
  id: z.number(),
  userId: z.number(),
  projectKey: z.string(),
  name: z.string(),
  roomId: z.string(),
  createdAt: timestamp,
  /** In `GET /auth/projects`: the caller's role (`owner`, `editor`, `viewer`). */
  role: z.enum(['owner', 'editor', 'viewer']).optional(),
  /** In `GET /auth/projects`: whose project it is. */
  owner: z.object({ userId: z.number(), email: z.string() }).optional(),
  /** A shared project's room grant: what this user's devices join its room with. */
  grant: z.string().optional(),
});
/** A user a project is shared with. */
export const memberSchema = z.object({
  userId: z.number(),
  email: z.string(),
  role: z.enum(['editor', 'viewer']),
  addedAt: timestamp,
});
export const membersSchema = z.object({
  owner: z.object({ userId: z.number(), email: z.string() }),
  members: z.array(memberSchema),
  /** The devices of the owner and the members. */
  devices: z
    .array(z.object({ id: z.number(), userId: z.number(), deviceName: z.string() }))
    .optional(),
});
export const memberAnswerSchema = z.object({ member: memberSchema });
export const subscriptionSchema = z.object({
  tier: z.string(),
  effectiveTier: z.string(),
  expiresAt: timestamp.nullable(),
  projectLimit: z.number().nullable(),
});
export const hostInfoSchema = z.object({
  authUrl: z.string(),
  relayUrl: z.string(),
  version: z.string(),
  /** Whether the host e-mails login links (false: development mode, links are printed). */
  smtp: z.boolean().optional(),
  /** With TLS on: the certificate's fingerprint (SHA-256 of its public key, base64url). */
  fingerprint: z.string().optional(),
});
export const errorBodySchema = z.object({
  error: z.object({ code: z.string(), message: z.string() }),
});

export const sentSchema = z.object({ sent: z.literal(true) });
export const deviceLoginSchema = z.object({
  deviceToken: z.string(),
  device: deviceSchema,
  user: userSchema,
});
export const jwtLoginSchema = z.object({ jwt: z.string(), user: userSchema });
export const registeredDeviceSchema = z.object({ deviceToken: z.string(), device: deviceSchema });
export const currentDeviceSchema = z.object({ device: deviceSchema, user: userSchema });
export const devicesSchema = z.object({ devices: z.array(deviceSchema) });
export const projectsSchema = z.object({ projects: z.array(projectSchema) });
export const projectAnswerSchema = z.object({ project: projectSchema });

export const pairingStartedSchema = z.object({
  pairingId: z.string(),
  code: z.string(),
  expiresAt: timestamp,
  interval: z.number().positive(),
  approveUrl: z.string(),
});
export const approvedBySchema = z.object({
  via: z.enum(['admin', 'device', 'link']),
  name: z.string().nullable(),
});
export const pairingPollSchema = z.discriminatedUnion('status', [
  z.object({ status: z.literal('pending') }),
  // approved by a signed-in device: the account this device would join, to accept or decline
  z.object({ status: z.literal('confirm'), email: z.string(), approvedBy: approvedBySchema }),
  z.object({
    status: z.literal('approved'),
    deviceToken: z.string(),
    device: deviceSchema,
    user: userSchema,
    approvedBy: approvedBySchema,
  }),
]);
export const approvedDeviceSchema = z.object({ device: deviceSchema });
/** A device waiting with a code, as an approver sees it before approving. */
export const waitingPairingSchema = z.object({
  pairing: z.object({
    code: z.string(),
    deviceName: z.string(),
    platform: z.string(),
    email: z.string().nullable(),
    clientAddress: z.string(),
    createdAt: timestamp,
    expiresAt: timestamp,
  }),
});
export const pairingLinkSchema = z.object({
  pairing: z.literal('approved'),
  device: deviceSchema,
  user: userSchema,
});

export type User = z.infer<typeof userSchema>;
/** `POST /auth/pair`: the code to show and where it is approved. */
export type PairingStarted = z.infer<typeof pairingStartedSchema>;
/** Who approved a pairing: the administrator, a signed-in device (its name), or the link (its address). */
export type ApprovedBy = z.infer<typeof approvedBySchema>;
export type PairingPoll = z.infer<typeof pairingPollSchema>;
/** The account a device approving this one offers: accepted, this device joins it. */
export type PairingOffer = Extract<PairingPoll, { status: 'confirm' }>;
/** A device waiting with a code: its name, platform and address. */
export type WaitingPairing = z.infer<typeof waitingPairingSchema>['pairing'];
/** An approved pairing: a signed-in device, and who approved it. */
export type Paired = Extract<PairingPoll, { status: 'approved' }>;
export type Device = z.infer<typeof deviceSchema>;
export type Project = z.infer<typeof projectSchema>;
export type Member = z.infer<typeof memberSchema>;
export type Members = z.infer<typeof membersSchema>;
export type Subscription = z.infer<typeof subscriptionSchema>;
/** `GET /.well-known/sync-host`: where the relay of this auth service is. */
export type HostInfo = z.infer<typeof hostInfoSchema>;

/** What a device is registered as. */
export interface DeviceDescription {
  /** At most 255 characters, e.g. the computer's name. */
  deviceName: string;
  /** At most 50 characters, e.g. `linux`, `darwin`, `win32`, `web`. */
  platform: string;
}

/** The result of a sign-in: the device token is the caller's to store (`syncDeviceToken`). */
export interface SignedIn {
  deviceToken: string;
  device: Device;
  user: User;
}
