import { z } from 'zod';
import { isStandardBase64 } from '../../protocol/base64.ts';
import {
  appendSchema,
  catchupSchema,
  chunkBadSchema,
  chunkGetSchema,
  chunkHaveSchema,
  chunkPutSchema,
  folderReportSchema,
  isJsonObject,
  joinSchema,
  leaveSchema,
  maxDeviceIdLength,
  pingSchema,
  type RouteFrame,
  routeSchema,
} from '../../protocol/relay-frames.ts';

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

/** What one inbound text frame turned out to be. */
export type InboundFrame =
  | z.infer<typeof controlSchema>
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

/** `"data":"`, the start of the member a large frame ends with. */
const dataMember = Buffer.from('"data":"');
/** Below this, a frame is parsed whole: the split pays off on a chunk's base64 only. */
const minSplitBytes = 16_384;

/**
 * Parses one text frame from its bytes, as `parseFrame` does. A `chunk-put` or `append` whose
 * `data` is its last member (`…,"data":"<base64>"}`, as the client writes it) is parsed without
 * its data, which is checked and decoded on its own (a chunk's base64 is most of the frame, and
 * JSON.parse of it and the UTF-8 decode of the frame were a fifth of the host's time while a
 * device uploaded a large file). The answer is the same: the data is taken only when it is base64 digits alone, so
 * the frame with its data emptied is valid JSON exactly when the frame is, and has the same
 * members but `data` (the last `data` wins in both). Any other frame is parsed whole.
 */
export function parseFrameBytes(bytes: Buffer): InboundFrame {
  const split = splitTrailingData(bytes);
  if (split !== undefined) {
    const frame = parseFrame(split.head);
    if ((frame.type === 'chunk-put' || frame.type === 'append') && frame.data === '') {
      return { ...frame, data: split.data };
    }
  }
  return parseFrame(bytes.toString('utf8'));
}

/**
 * The frame with its trailing `data` emptied, and that data, when the frame ends with a `data`
 * member of standard base64 (checked here: its bytes are kept for the put that follows).
 */
export function splitTrailingData(bytes: Buffer): { head: string; data: string } | undefined {
  const n = bytes.length;
  if (n < minSplitBytes || bytes[n - 1] !== 0x7d || bytes[n - 2] !== 0x22) return undefined;
  // the first `"data":"` in the frame: the data from there to the end is base64 (checked below,
  // and base64 has no quote) only when it is the last member
  const key = bytes.indexOf(dataMember);
  if (key < 1) return undefined;
  const before = bytes[key - 1];
  if (before !== 0x2c && before !== 0x7b) return undefined;
  const open = key + dataMember.length - 1;
  const data = bytes.toString('latin1', open + 1, n - 2);
  // digits only: no escape, no quote, no character outside ASCII (else parsed whole)
  if (!isStandardBase64(data)) return undefined;
  return { head: `${bytes.toString('utf8', 0, open + 1)}"}`, data };
}
