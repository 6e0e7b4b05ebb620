import type { z } from 'zod';
import { relayFrameSchemas, wireDeviceId } from '../protocol/relay-frames.ts';

/** Frames the relay sends (the relay protocol), validated when they arrive; device ids as strings. */
const frames = relayFrameSchemas(wireDeviceId.transform(String));
const { joined: joinedSchema, presence: presenceSchema, host: hostSchema } = frames;
const { error: errorSchema, routed: routedSchema, control: controlSchema } = frames;
const { appended: appendedSchema, stored: storedSchema, caughtup: caughtupSchema } = frames;

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

/**
 * The host's document store (docs/store.md) answers `append` and `catchup` (never routed nor
 * buffered) with `appended` (the entry is on the host's disk at `pos`), `stored` (one page of a
 * catch-up), `caughtup` (complete; `pos` is the host's last position of the document) and the
 * `error` frames that name a document (`store_full`, `store_unavailable`, `invalid_message`).
 */
export type StoredFrame = z.infer<typeof storedSchema>;
export type StoredEntry = StoredFrame['entries'][number];
export type StoreFrame =
  | z.infer<typeof appendedSchema>
  | StoredFrame
  | z.infer<typeof caughtupSchema>
  | (ErrorFrame & { doc: string });

export type RelayFrame =
  | Exclude<z.infer<typeof controlSchema>, StoreFrame>
  | ({ type: 'message' } & RoutedMessage)
  | { type: 'store'; frame: StoreFrame };

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
    if (!control.success) return undefined;
    const frame = control.data;
    if (frame.type === 'appended' || frame.type === 'stored' || frame.type === 'caughtup') {
      return { type: 'store', frame };
    }
    if (frame.type === 'error' && frame.doc !== undefined) {
      return { type: 'store', frame: { ...frame, doc: frame.doc } };
    }
    return frame as RelayFrame;
  }
  const routed = routedSchema.safeParse(value);
  return routed.success ? { type: 'message', ...routed.data } : undefined;
}
