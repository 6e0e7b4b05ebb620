import { z } from 'zod';
import { relayFrameSchemas, routeSchema, wireDeviceId } from '../../protocol/relay-frames.ts';

/**
 * The local control protocol of a running `sync`: newline-delimited JSON over its control socket
 * (see control-socket.ts). One request per line; `send` and `status` get one answer line,
 * `listen` gets `{"ok":true}` then one event line per relay event until the client closes.
 */

/** The longest request line a control socket reads, in bytes (a relay message is at most 1 MiB). */
export const maxRequestBytes = 4 * 1_048_576;

export const controlRequestSchema = z.discriminatedUnion('op', [
  /** Send `payload` to `to` on the sync's connection; answered once the relay confirmed it. */
  z.object({ op: z.literal('send'), to: routeSchema.shape.to, payload: routeSchema.shape.payload }),
  /** Stream every routed message and room event the sync receives. */
  z.object({ op: z.literal('listen') }),
  /** What the sync is doing (connection state, folder, devices present...). */
  z.object({ op: z.literal('status') }),
  /** `history`, run by the sync on its connection: what it prints, in `output`. */
  z.object({ op: z.literal('history'), path: z.string().optional() }),
  /** `restore`, run by the sync on its connection and its folder: what it prints, in `output`. */
  z.object({ op: z.literal('restore'), path: z.string(), at: z.number().optional() }),
]);

export type ControlRequest = z.infer<typeof controlRequestSchema>;

/**
 * A running sync's status. These fields are always there; the sync command may add others
 * (the folder's counts...), which clients keep.
 */
export const syncStatusSchema = z.looseObject({
  /**
   * The relay connection: `idle`, `connecting`, `joined`, `reconnecting`, `waiting` (between
   * connections), `stopped`.
   */
  state: z.string(),
  projectKey: z.string(),
  /** The synced folder, absolute. */
  folder: z.string(),
  /** This device's id. */
  device: z.string(),
  /** Device ids present in the room, this one included, as of the last event. */
  devices: z.array(z.string()),
  /** The sync process's id. */
  pid: z.number().int(),
});

export type SyncStatus = z.infer<typeof syncStatusSchema>;

const errorSchema = z.object({ code: z.string(), message: z.string() });

export const controlResponseSchema = z.union([
  z.object({
    ok: z.literal(true),
    status: syncStatusSchema.optional(),
    /** What a command run by the sync prints (`history`, `restore`). */
    output: z.object({ stdout: z.string(), stderr: z.string() }).optional(),
  }),
  z.object({ ok: z.literal(false), error: errorSchema }),
]);

export type ControlResponse = z.infer<typeof controlResponseSchema>;

const frames = relayFrameSchemas(wireDeviceId.transform(String));

/** One line of a `listen` stream after its `{"ok":true}`. */
export const controlEventSchema = z.union([
  z.object({ message: frames.routed }),
  z.object({ joined: frames.joined }),
  z.object({ presence: frames.presence }),
  z.object({ host: frames.host }),
  z.object({ state: z.string() }),
]);

export type ControlEvent = z.infer<typeof controlEventSchema>;

/** `value` as one line of the protocol. */
export function controlLine(value: ControlResponse | ControlEvent | ControlRequest): string {
  return `${JSON.stringify(value)}\n`;
}

/** A line parsed with `schema`, or the reason it is not one (`invalid_json`, `invalid_request`). */
export function parseControlLine<T>(
  line: string,
  schema: z.ZodType<T>,
):
  | { ok: true; value: T }
  | { ok: false; code: 'invalid_json' | 'invalid_request'; message: string } {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (err: unknown) {
    if (!(err instanceof SyntaxError)) throw err;
    return { ok: false, code: 'invalid_json', message: 'the line is not JSON' };
  }
  const parsed = schema.safeParse(value);
  if (parsed.success) return { ok: true, value: parsed.data };
  const issue = parsed.error.issues[0];
  const where = issue === undefined || issue.path.length === 0 ? '' : `${issue.path.join('.')}: `;
  return {
    ok: false,
    code: 'invalid_request',
    message: `${where}${issue?.message ?? 'not a request of the control protocol'}`,
  };
}
