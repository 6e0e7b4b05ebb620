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
});
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

export type User = z.infer<typeof userSchema>;
export type Device = z.infer<typeof deviceSchema>;
export type Project = z.infer<typeof projectSchema>;
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
