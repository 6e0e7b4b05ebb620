import { z } from 'zod';
import { takeCheckedBase64 } from '../../protocol/base64.ts';
import {
  appendSchema,
  type ChunkPutFrame,
  catchupSchema,
  chunkBadSchema,
  chunkGetSchema,
  chunkHaveSchema,
  chunkPutSchema,
  decodeBinaryFrame,
  folderReportSchema,
  isJsonObject,
  joinSchema,
  leaveSchema,
  maxDeviceIdLength,
  pingSchema,
  type RouteFrame,
  routeSchema,
} from '../../protocol/relay-frames.ts';
import { splitTrailingData } from '../../protocol/trailing-data.ts';

/** Frames with a `type`: a discriminated union, one schema per kind. */
const controlSchema = z.discriminatedUnion('type', [
  joinSchema,
  leaveSchema,
  pingSchema,
  appendSchema,
  catchupSchema,
  chunkPutSchema,
  chunkHaveSchema,
  chunkGetSchema,
  chunkBadSchema,
  folderReportSchema,
]);

/** The frames answered by the store whose error names the `ref` (and `doc` or `id`) they had. */
const storeTypes: readonly string[] = [
  'append',
  'catchup',
  'chunk-put',
  'chunk-have',
  'chunk-get',
  'chunk-bad',
];

/** The `type`s a client may send. */
const controlTypes: readonly string[] = ['join', 'leave', 'ping', ...storeTypes, 'folder-report'];

/** A routed frame (the common spelling never gets here: `routed-bytes.ts` takes it on its bytes). */
export type ParsedRoute = { type: 'route' } & RouteFrame;

/** A frame whose data may come decoded already, as `decoded` (`data` is then empty). */
export type WithDecoded<F> = F & { decoded?: Buffer };
type ControlFrame = z.infer<typeof controlSchema>;

/** What one inbound text frame turned out to be. */
export type InboundFrame =
  | Exclude<ControlFrame, { type: 'chunk-put' | 'append' }>
  | WithDecoded<Extract<ControlFrame, { type: 'chunk-put' | 'append' }>>
  | ParsedRoute
  | { type: 'invalid_json' }
  | { type: 'invalid_message'; message: string; doc?: string; ref?: number; id?: string };

/**
 * The document and ref of a malformed store frame, when they are well formed themselves: its
 * error frame names them, so that the client knows which append was refused.
 */
function storeFrameRef(value: Record<string, unknown>): {
  doc?: string;
  ref?: number;
  id?: string;
} {
  if (typeof value.type !== 'string' || !storeTypes.includes(value.type)) return {};
  const about: { doc?: string; ref?: number; id?: string } = {};
  if (typeof value.doc === 'string' && value.doc.length <= maxDeviceIdLength) about.doc = value.doc;
  if (typeof value.ref === 'number' && Number.isSafeInteger(value.ref)) about.ref = value.ref;
  if (typeof value.id === 'string' && value.id.length <= 44) about.id = value.id;
  return about;
}

/**
 * `routeSchema`'s acceptance written out by hand, for the hot path: a valid routed frame is
 * accepted without building zod's result objects. Anything it does not accept goes through
 * `routeSchema`, which accepts exactly the same frames and words the error.
 */
function acceptRouted(value: Record<string, unknown>): InboundFrame | undefined {
  const { to, payload } = value;
  if (!isJsonObject(payload)) return undefined;
  if (typeof to === 'string') {
    if (to.length === 0 || to.length > maxDeviceIdLength) return undefined;
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
    const routed = routeSchema.safeParse(value);
    if (!routed.success) return { type: 'invalid_message', message: describeIssue(routed.error) };
    return { type: 'route', to: routed.data.to, payload: routed.data.payload };
  }
  const control = controlSchema.safeParse(value);
  if (!control.success) {
    if (typeof value.type !== 'string' || !controlTypes.includes(value.type)) {
      return {
        type: 'invalid_message',
        message: `unknown type (expected ${controlTypes.join(', ')})`,
      };
    }
    const about = storeFrameRef(value);
    return { type: 'invalid_message', message: describeIssue(control.error), ...about };
  }
  return control.data;
}

/**
 * Parses one text frame from its bytes, as `parseFrame` does. A `chunk-put` or `append` whose
 * `data` is its last member (as the client writes it) is parsed without its data, which is
 * checked and decoded from the frame's bytes on its own (`splitTrailingData`): the frame then
 * has `data` empty and the bytes as `decoded` (see `dataOf`). Any other frame is parsed whole.
 */
export function parseFrameBytes(bytes: Buffer): InboundFrame {
  const split = splitTrailingData(bytes);
  if (split !== undefined) {
    const frame = parseFrame(split.head);
    if ((frame.type === 'chunk-put' || frame.type === 'append') && frame.data === '') {
      return { ...frame, decoded: split.bytes as Buffer };
    }
  }
  return parseFrame(bytes.toString('utf8'));
}

/** A malformed frame: its error names the ref (and doc or chunk id) of a store frame. */
export type InvalidFrame = Extract<InboundFrame, { type: 'invalid_message' }>;

/**
 * Parses one binary frame: a `chunk-put` in the binary form (protocol/relay-frames.ts), whose
 * bytes become its `decoded` data (`data` empty), or `invalid_message` for a `chunk-put` header
 * whose members are wrong (as its text form would be answered). undefined for any other binary
 * frame: a malformed header, another type, anything else (closed with 1003).
 */
export function parseBinaryFrame(
  bytes: Buffer,
): WithDecoded<ChunkPutFrame> | InvalidFrame | undefined {
  const binary = decodeBinaryFrame(bytes);
  if (binary === undefined || binary.header.type !== 'chunk-put') return undefined;
  const parsed = chunkPutSchema.safeParse({ ...binary.header, data: '' });
  if (!parsed.success) {
    const about = storeFrameRef(binary.header);
    return { type: 'invalid_message', message: describeIssue(parsed.error), ...about };
  }
  const { data } = binary;
  return { ...parsed.data, decoded: Buffer.from(data.buffer, data.byteOffset, data.byteLength) };
}

/** The bytes of a `chunk-put` or `append`: decoded when its frame was split, else now. */
export function dataOf(frame: WithDecoded<{ data: string }>): Buffer {
  if (frame.decoded !== undefined) return frame.decoded;
  const checked = takeCheckedBase64(frame.data);
  if (checked === undefined) return Buffer.from(frame.data, 'base64');
  return Buffer.from(checked.buffer, checked.byteOffset, checked.byteLength);
}
