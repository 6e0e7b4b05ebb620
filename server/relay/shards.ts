import { djb2 } from '../hashing.ts';

/** Number of in-process room partitions. A later multi-node relay maps slots to nodes. */
export const defaultShardCount = 16;

/** The slot of a room: djb2(roomId) modulo the number of slots (contract 6, rule 10). */
export function roomSlot(roomId: string, shardCount: number): number {
  return djb2(roomId) % shardCount;
}

/** Rooms partitioned by slot; each slot owns its rooms. */
export interface Shards<R> {
  readonly count: number;
  get(roomId: string): R | undefined;
  getOrCreate(roomId: string, create: (slot: number) => R): R;
  delete(roomId: string): void;
  /** Every room of every slot. */
  rooms(): IterableIterator<R>;
  readonly size: number;
}

export function createShards<R>(count: number = defaultShardCount): Shards<R> {
  const slots: Map<string, R>[] = Array.from({ length: count }, () => new Map<string, R>());
  let size = 0;
  const slotOf = (roomId: string): Map<string, R> => slots[roomSlot(roomId, count)]!;
  return {
    count,
    get: (roomId) => slotOf(roomId).get(roomId),
    getOrCreate(roomId, create) {
      const slot = slotOf(roomId);
      let room = slot.get(roomId);
      if (room === undefined) {
        room = create(roomSlot(roomId, count));
        slot.set(roomId, room);
        size++;
      }
      return room;
    },
    delete(roomId) {
      if (slotOf(roomId).delete(roomId)) size--;
    },
    *rooms() {
      for (const slot of slots) yield* slot.values();
    },
    get size() {
      return size;
    },
  };
}
