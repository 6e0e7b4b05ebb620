import type { StreamFrame } from './stream-record.ts';

/** A device of this node in a held room. */
export interface LocalDevice {
  /** Its join is being registered and its replay read: frames for it wait in `queue`. */
  pending: boolean;
  /** In order: frames of the stream (by sequence) and frames routed here while it joins. */
  queue: StreamFrame[];
  /** Frames up to this stream sequence reached it by its replay (or predate its join). */
  upto: number;
  /**
   * This node's publication counter when the join began. The node's later publications for the
   * device were routed while it joined: they reach it through `queue`, not through its replay.
   */
  ownFrom: number;
}

/**
 * Frames this node routes to its own devices while their join is registered. Such a device is
 * not yet among the room's members, so the room hands a frame for it (direct or broadcast) to
 * the line, which publishes it (kept for the device if the join fails) and queues it for the
 * device in the order routed: the device gets it after its replay, before anything newer, once.
 * The node skips its own frames when it follows the room's stream, and the replay skips these.
 */

/** Whether a device here other than `from` is joining (a broadcast must then be published). */
export function joiningBesides(local: ReadonlyMap<string, LocalDevice>, from: string): boolean {
  for (const [device, joining] of local) if (joining.pending && device !== from) return true;
  return false;
}

/** Queues publication `f` (a frame from `f.from` to `f.to`, a device or `*`) for the joining devices. */
export function queueForJoining(local: ReadonlyMap<string, LocalDevice>, f: StreamFrame): void {
  if (f.to !== '*') {
    const joining = local.get(f.to);
    if (joining?.pending === true) joining.queue.push(f);
    return;
  }
  for (const [device, joining] of local) {
    if (joining.pending && device !== f.from) joining.queue.push(f);
  }
}
