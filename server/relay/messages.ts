import { z } from 'zod';

/**
 * A device id as a client writes it: a positive integer or its decimal string (what a device
 * token carries); any short string when token validation is off. Compared as strings.
 */
const deviceIdSchema = z.union([
  z.number().int().positive().max(Number.MAX_SAFE_INTEGER),
  z.string().min(1).max(255),
]);

const joinSchema = z.object({
  type: z.literal('join'),
  room: z.string().min(1).max(255),
  device: deviceIdSchema,
  /** Optional in the shape so a missing token is reported as `auth_failed`, not `invalid_message`. */
  token: z.string().max(1024).optional(),
});

const leaveSchema = z.object({ type: z.literal('leave') });
const pingSchema = z.object({ type: z.literal('ping') });

/** Frames with a `type`: a discriminated union, one schema per kind. */
const controlSchema = z.discriminatedUnion('type', [joinSchema, leaveSchema, pingSchema]);

function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A routed message has no `type`; `room` and `from` may be present and are ignored. */
const routedSchema = z.object({
  to: z.union([z.literal('host'), z.literal('broadcast'), deviceIdSchema], {
    error: 'to must be "host", "broadcast" or a device id',
  }),
  payload: z.custom<Record<string, unknown>>(isJsonObject, {
    error: 'payload must be a JSON object',
  }),
});

export type JoinFrame = z.infer<typeof joinSchema>;
export type RoutedFrame = z.infer<typeof routedSchema>;
export type DeviceId = z.infer<typeof deviceIdSchema>;

/** A routed frame (the common spelling never gets here: `routed-bytes.ts` takes it on its bytes). */
export type RouteFrame = { type: 'route' } & RoutedFrame;

/** What one inbound text frame turned out to be. */
export type InboundFrame =
  | z.infer<typeof controlSchema>
  | RouteFrame
  | { type: 'invalid_json' }
  | { type: 'invalid_message'; message: string };

/**
 * `routedSchema`'s acceptance written out by hand, for the hot path: a valid routed frame is
 * accepted without building zod's result objects. Anything it does not accept goes through
 * `routedSchema`, which accepts exactly the same frames and words the error.
 */
function acceptRouted(value: Record<string, unknown>): InboundFrame | undefined {
  const { to, payload } = value;
  if (!isJsonObject(payload)) return undefined;
  if (typeof to === 'string') {
    if (to.length === 0 || to.length > 255) return undefined;
  } else if (typeof to !== 'number' || !Number.isSafeInteger(to) || to <= 0) {
    return undefined;
  }
  return { type: 'route', to, payload };
}

function describeIssue(error: z.ZodError): string {
  const issue = error.issues[0];
  if (issue === undefined) return 'invalid message';
  const path = issue.path.join('.');
  return path === '' ? issue.message : `${path}: ${issue.message}`;
}

/** Parses one text frame once: JSON, then the schema of its kind. Never throws. */
export function parseFrame(text: string): InboundFrame {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err: unknown) {
    if (err instanceof SyntaxError || err instanceof RangeError) return { type: 'invalid_json' };
    throw err;
  }
  if (!isJsonObject(value)) {
    return { type: 'invalid_message', message: 'a frame must be a JSON object' };
  }
  if (value.type === undefined) {
    const fast = acceptRouted(value);
    if (fast !== undefined) return fast;
    const routed = routedSchema.safeParse(value);
    if (!routed.success) return { type: 'invalid_message', message: describeIssue(routed.error) };
    return { type: 'route', to: routed.data.to, payload: routed.data.payload };
  }
  const control = controlSchema.safeParse(value);
  if (!control.success) {
    if (typeof value.type !== 'string' || !['join', 'leave', 'ping'].includes(value.type)) {
      return { type: 'invalid_message', message: 'unknown type (expected join, leave or ping)' };
    }
    return { type: 'invalid_message', message: describeIssue(control.error) };
  }
  return control.data;
}

/** The key a device id is known by: its decimal string, whatever JSON type the client used. */
export function deviceKey(device: DeviceId): string {
  return typeof device === 'number' ? String(device) : device;
}
