import * as Y from 'yjs';

/** Deleted ranges of one Yjs client: `[clock, length]`, sorted, not overlapping. */
type Ranges = [number, number][];

/** What `HostSummary` keeps between runs (JSON). */
export interface HostSummaryData {
  /** Client id → the clock up to which the host holds that client's structs. */
  v: Record<string, number>;
  /** Client id → the ranges of that client's items the host knows as deleted. */
  d: Record<string, Ranges>;
}

/**
 * What the host holds of one document, as far as this device knows: the end of each client's
 * structs (a state vector) and the deleted ranges (a delete set), from every entry the device
 * applied from the host or had acknowledged. A Yjs deletion does not advance the state vector,
 * so both are compared: `missing(doc)` is what the document holds beyond them (an offline edit,
 * a deletion included), or undefined when the host has it all. Much smaller than a copy of the
 * document: two numbers per client and the deleted ranges.
 */
export class HostSummary {
  private readonly vector = new Map<number, number>();
  private readonly deletes = new Map<number, Ranges>();

  constructor(data?: HostSummaryData) {
    for (const [client, clock] of Object.entries(data?.v ?? {})) {
      this.vector.set(Number(client), clock);
    }
    for (const [client, ranges] of Object.entries(data?.d ?? {})) {
      this.deletes.set(Number(client), ranges);
    }
  }

  /** The host holds `update` (a Yjs update, v1) as well. */
  add(update: Uint8Array): void {
    const { to } = Y.parseUpdateMeta(update);
    for (const [client, clock] of to) {
      if (clock > (this.vector.get(client) ?? 0)) this.vector.set(client, clock);
    }
    for (const [client, items] of Y.decodeUpdate(update).ds.clients) {
      this.addRanges(
        client,
        items.map((item) => [item.clock, item.len]),
      );
    }
  }

  /** An update with what `doc` holds beyond the host, or undefined when it holds nothing more. */
  missing(doc: Y.Doc): Uint8Array | undefined {
    const ahead = [...Y.decodeStateVector(Y.encodeStateVector(doc))].some(
      ([client, clock]) => clock > (this.vector.get(client) ?? 0),
    );
    if (!ahead && this.coversDeletes(doc)) return undefined;
    return Y.encodeStateAsUpdate(doc, Y.encodeStateVector(this.vector));
  }

  toJSON(): HostSummaryData {
    return {
      v: Object.fromEntries(this.vector),
      d: Object.fromEntries(this.deletes),
    };
  }

  private coversDeletes(doc: Y.Doc): boolean {
    for (const [client, items] of Y.createDeleteSetFromStructStore(doc.store).clients) {
      const known = this.deletes.get(client) ?? [];
      for (const item of items) {
        if (!covered(known, item.clock, item.len)) return false;
      }
    }
    return true;
  }

  private addRanges(client: number, added: Ranges): void {
    const all = [...(this.deletes.get(client) ?? []), ...added].sort((a, b) => a[0] - b[0]);
    const merged: Ranges = [];
    for (const [clock, len] of all) {
      const last = merged.at(-1);
      if (last !== undefined && clock <= last[0] + last[1]) {
        last[1] = Math.max(last[1], clock + len - last[0]);
      } else {
        merged.push([clock, len]);
      }
    }
    this.deletes.set(client, merged);
  }
}

/** Whether `[clock, clock + len)` lies within one of `ranges` (sorted, merged). */
function covered(ranges: Ranges, clock: number, len: number): boolean {
  let low = 0;
  let high = ranges.length - 1;
  while (low <= high) {
    const middle = (low + high) >> 1;
    const [start, length] = ranges[middle]!;
    if (clock < start) high = middle - 1;
    else if (clock >= start + length) low = middle + 1;
    else return clock + len <= start + length;
  }
  return false;
}
