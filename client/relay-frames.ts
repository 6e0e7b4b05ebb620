import { z } from 'zod';

/** Frames the relay sends (contract section 6), validated when they arrive. */

const deviceId = z.union([z.string(), z.number()]).transform(String);

const joinedSchema = z.object({
  type: z.literal('joined'),
  room: z.string(),
  device: deviceId,
  role: z.enum(['host', 'member']),
  host: deviceId,
  devices: z.array(deviceId),
  buffered: z.number().int().nonnegative(),
  gap: z.boolean(),
});

const presenceSchema = z.object({
  type: z.literal('presence'),
  room: z.string(),
  device: deviceId,
  state: z.enum(['joined', 'left']),
  /** Why a device left: `leave`, `disconnect`, `revoked` (relay's own addition). */
  reason: z.string().optional(),
});

const hostSchema = z.object({ type: z.literal('host'), room: z.string(), device: deviceId });
const errorSchema = z.object({
  type: z.literal('error'),
  code: z.string(),
  message: z.string().default(''),
});
const pongSchema = z.object({ type: z.literal('pong') });

const controlSchema = z.discriminatedUnion('type', [
  joinedSchema,
  presenceSchema,
  hostSchema,
  errorSchema,
  pongSchema,
]);

const routedSchema = z.object({
  from: deviceId,
  to: deviceId,
  room: z.string(),
  payload: z.record(z.string(), z.unknown()),
});

/** `joined`: this device is in the room; `buffered` missed messages follow at once. */
export type JoinedFrame = z.infer<typeof joinedSchema>;
/** Another device joined or left the room. */
export type PresenceFrame = z.infer<typeof presenceSchema>;
/** The host changed (the previous host left). */
export type HostFrame = z.infer<typeof hostSchema>;
export type ErrorFrame = z.infer<typeof errorSchema>;

/**
 * A message routed to this device: `from` is the sender's device id, `to` what the sender
 * addressed (`host`, `broadcast` or this device's id). Device ids are strings here.
 */
export type RoutedMessage = z.infer<typeof routedSchema>;

export type RelayFrame = z.infer<typeof controlSchema> | ({ type: 'message' } & RoutedMessage);

/** Parses one text frame; undefined when it is not JSON or not a frame of the protocol. */
export function parseRelayFrame(text: string): RelayFrame | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err: unknown) {
    if (err instanceof SyntaxError) return undefined;
    throw err;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  if ('type' in value) {
    const control = controlSchema.safeParse(value);
    return control.success ? control.data : undefined;
  }
  const routed = routedSchema.safeParse(value);
  return routed.success ? { type: 'message', ...routed.data } : undefined;
}
