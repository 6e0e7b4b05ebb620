import { JoinsUnavailable } from '../../protocol/relay-codes.ts';
import type { JoinFrame } from '../../protocol/relay-frames.ts';
import type { Connection, JoinedRoom } from './connection.ts';
import { closeWith } from './protocol-errors.ts';
import { Room, type RoomContext } from './room.ts';
import type { Shards } from './shards.ts';

/** One room's line in the relay's status. */
export interface RoomStatus {
  room: string;
  connections: number;
  devices: string[];
}

/** The rooms this process holds, by slot: a room exists while one of its devices is connected here. */
export interface Rooms {
  /** A validated join: into its room, made if needed. */
  join(conn: Connection, frame: JoinFrame): void;
  /** `{"type":"leave"}` from a joined connection. */
  leave(conn: Connection): void;
  /** The socket closed: a joined device without leave becomes absent and is kept for. */
  drop(conn: Connection): void;
  /** Closes every connection of the device here with 4003. */
  revoke(device: string): void;
  /**
   * A membership ended: closes with 4003 the connections to `roomId` admitted on a grant of
   * membership key `memberKey` whose membership id is `memberId` or older.
   */
  revokeMember(roomId: string, memberKey: string, memberId: number): void;
  /** Forgets rooms nobody is connected to, and has the broker expire what it keeps. */
  sweep(): void;
  /** Every joined connection becomes absent (shutdown); no presence frames are sent. */
  dropAll(): void;
  /** Rooms with a device connected here. */
  active(): number;
  /** Every active room with its devices. */
  status(): RoomStatus[];
}

export function createRooms(shards: Shards<Room>, context: RoomContext): Rooms {
  function forgetIfIdle(room: JoinedRoom): void {
    if (!room.idle) return;
    shards.delete(room.id);
    room.close();
  }

  return {
    join(conn, frame) {
      if (!context.broker.accepting()) {
        closeWith(conn, JoinsUnavailable);
        return;
      }
      const room = shards.getOrCreate(frame.room, (slot) => new Room(frame.room, slot, context));
      if (!room.join(conn, frame)) forgetIfIdle(room);
    },

    leave(conn) {
      const room = conn.room;
      if (room === undefined) return;
      room.leave(conn);
      forgetIfIdle(room);
    },

    drop(conn) {
      const room = conn.room;
      if (room === undefined) return;
      room.drop(conn);
      forgetIfIdle(room);
    },

    revoke(device) {
      // A rare admin action: a scan of the rooms instead of a per-device index kept for it
      // on every join (memory per connection is what a relay of idle devices is made of).
      for (const room of [...shards.rooms()]) {
        if (room.revoke(device)) forgetIfIdle(room);
      }
    },

    revokeMember(roomId, memberKey, memberId) {
      const room = shards.get(roomId);
      if (room === undefined) return;
      room.revokeMember(memberKey, memberId);
      forgetIfIdle(room);
    },

    sweep() {
      for (const room of [...shards.rooms()]) forgetIfIdle(room);
      context.broker.sweep();
    },

    dropAll() {
      for (const room of shards.rooms()) room.dropAll();
    },

    active() {
      let count = 0;
      for (const room of shards.rooms()) if (room.members.size > 0) count++;
      return count;
    },

    status() {
      const perRoom: RoomStatus[] = [];
      for (const room of shards.rooms()) {
        if (room.members.size === 0) continue;
        perRoom.push({
          room: room.id,
          connections: room.members.size,
          devices: [...room.members.keys()],
        });
      }
      return perRoom;
    },
  };
}
