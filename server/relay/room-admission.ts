import type { JoinedFrame } from '../../protocol/relay-frames.ts';
import type { Admission } from './broker.ts';
import type { Connection } from './connection.ts';
import type { MemberRecords } from './room-members.ts';
import type { UnsentFrame } from './send-queue.ts';

/** A join handed to the line: its connection, and the older connection's unsent frames. */
export interface PendingJoin {
  conn: Connection;
  carried: UnsentFrame[];
}

/**
 * An admitted device's first frames: `joined` (its role, the host and the devices present, from
 * the room's records), then the older connection's unsent frames with their positions in the
 * room's stream, then what the broker kept for it. Returns the `joined` frame.
 */
export function sendAdmission(
  roomId: string,
  records: MemberRecords,
  { conn, carried }: PendingJoin,
  { frames, gap }: Admission,
): JoinedFrame {
  const key = conn.deviceKey;
  const hostKey = records.hostKey ?? key;
  const joined: JoinedFrame = {
    type: 'joined',
    room: roomId,
    device: conn.deviceId,
    role: hostKey === key ? 'host' : 'member',
    host: records.idOf(hostKey) ?? conn.deviceId,
    devices: records.devices(),
    buffered: carried.length + frames.length,
    gap,
  };
  conn.queue.send(Buffer.from(JSON.stringify(joined)));
  const replay = frames.map((text) => Buffer.from(text));
  // the replay may exceed relay.maxQueuedBytes on its own: allowed until it is written out
  for (const { frame } of carried) conn.queue.allowReplay(frame.length);
  for (const frame of replay) conn.queue.allowReplay(frame.length);
  for (const { frame, position } of carried) conn.queue.send(frame, position);
  for (const frame of replay) conn.queue.send(frame);
  return joined;
}
