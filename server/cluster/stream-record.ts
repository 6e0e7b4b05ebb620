import type { JsMsg } from '@nats-io/jetstream';
import { type MsgHdrs, headers as natsHeaders } from '@nats-io/transport-node';
import {
  envelopeIdAt,
  envelopeTextMaxLength,
  envelopeTextStart,
} from '../../protocol/sync-envelope.ts';
import { type RecordSeal, sealBytes } from './record-seal.ts';

/** One routed frame as it travels in a room's stream. */
export interface StreamFrame {
  seq: number;
  /** The receiver's device key, or `*` for a broadcast. */
  to: string;
  /** The sender's device key; `relaySender` for a frame of the relay's own. */
  from: string;
  /** The node that published it, and that node's publication counter. */
  node: string;
  nodeSeq: number;
  frame: Buffer;
}

/**
 * A frame's record in a room's stream: its routing, then the frame's bytes, in the message's
 * data. Byte 0 is the version (a JSON frame, the format before, starts with `{`), then `to`,
 * `from` and `node`, each a 16-bit length and UTF-8 bytes, then `nodeSeq` as a 64-bit float, then
 * the frame. In the data rather than in NATS headers: headers are parsed by nats-server on every
 * publication and by the client on every delivery, and a node reads the sender node of each
 * record (its own publications come back too and are skipped) before anything else.
 */
const recordVersion = 1;
/** Version 2: the same, followed by the record's seal (record-seal.ts), over the bytes before it. */
const sealedVersion = 2;
const lengthBytes = 2;
const nodeSeqBytes = 8;

/**
 * The `from` of a frame the relay itself sends to the room's devices (`RoomLine.notice`): no
 * device id is empty. The replay of a device's join skips such a frame.
 */
export const relaySender = '';

/** The sender's device key from a routed frame (`{"from":<id>,...`). */
export function senderOf(frame: Buffer): string {
  const text = frame.toString('utf8', 0, Math.min(frame.length, 400));
  const start = text.indexOf(':') + 1;
  if (text[start] === '"') {
    let end = start + 1;
    while (end < text.length && text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
    return JSON.parse(text.slice(start, end + 1)) as string;
  }
  const end = text.indexOf(',', start);
  return text.slice(start, end);
}

const envelopeStartBytes = Buffer.from(envelopeTextStart, 'utf8');

/**
 * The JetStream message id of a frame with the client library's envelope (`protocol/sync-envelope.ts`;
 * NATS drops re-sends).
 */
function messageIdOf(from: string, frame: Buffer): string | undefined {
  const at = frame.indexOf(envelopeStartBytes);
  if (at < 0) return undefined;
  const id = envelopeIdAt(frame.toString('utf8', at, at + envelopeTextMaxLength));
  return id === undefined ? undefined : `${from}.${id}`;
}

/** The bytes of `node` in a record, kept for the node's own name (one per process). */
let nodeName = '';
let nodeBytes = Buffer.alloc(0);
function bytesOfNode(node: string): Buffer {
  if (node !== nodeName) {
    nodeName = node;
    nodeBytes = Buffer.from(node, 'utf8');
  }
  return nodeBytes;
}

/**
 * A frame's record and its headers (only a message id, when the frame has an envelope); sealed
 * for `subject` (the room's) with `sealed`.
 */
export function encodeRecord(
  frame: Omit<StreamFrame, 'seq'>,
  sealed?: { seal: RecordSeal; subject: string },
): {
  payload: Buffer;
  headers: MsgHdrs | undefined;
} {
  const to = Buffer.from(frame.to, 'utf8');
  const from = Buffer.from(frame.from, 'utf8');
  const node = bytesOfNode(frame.node);
  const routing = 1 + 3 * lengthBytes + to.length + from.length + node.length + nodeSeqBytes;
  const body = routing + frame.frame.length;
  const payload = Buffer.allocUnsafe(body + (sealed === undefined ? 0 : sealBytes));
  payload[0] = sealed === undefined ? recordVersion : sealedVersion;
  let at = 1;
  for (const part of [to, from, node]) {
    at = payload.writeUInt16BE(part.length, at);
    at += part.copy(payload, at);
  }
  at = payload.writeDoubleBE(frame.nodeSeq, at);
  frame.frame.copy(payload, at);
  if (sealed !== undefined) {
    sealed.seal.tag('frame', sealed.subject, payload.subarray(0, body)).copy(payload, body);
  }
  const id = messageIdOf(frame.from, frame.frame);
  if (id === undefined) return { payload, headers: undefined };
  const headers = natsHeaders();
  // the only header of a fresh set: append spares set's search for an earlier value
  headers.append('Nats-Msg-Id', id);
  return { payload, headers };
}

/** Whether the record `data` was published by the node whose name's bytes are `node`. */
export function isRecordOf(data: Uint8Array, node: Buffer): boolean {
  if (data[0] !== recordVersion && data[0] !== sealedVersion) return false;
  const nodeAt = skip(data, skip(data, 1));
  const length = ((data[nodeAt] ?? 0) << 8) | (data[nodeAt + 1] ?? 0);
  return length === node.length && node.equals(data.subarray(nodeAt + 2, nodeAt + 2 + length));
}

/** The offset after the length-prefixed part at `at`. */
function skip(data: Uint8Array, at: number): number {
  return at + lengthBytes + (((data[at] ?? 0) << 8) | (data[at + 1] ?? 0));
}

/**
 * Reads a record back (or a frame of the format before, routed by headers); the seal of a sealed
 * one is checked by {@link isSealedRecord} before.
 */
export function decodeRecord(m: Pick<JsMsg, 'seq' | 'data' | 'headers'>): StreamFrame {
  const { seq, data } = m;
  const sealed = data[0] === sealedVersion;
  const bytes = Buffer.from(
    data.buffer,
    data.byteOffset,
    data.byteLength - (sealed ? sealBytes : 0),
  );
  if (bytes[0] !== recordVersion && !sealed) {
    const headers = m.headers;
    return {
      seq,
      to: headers?.get('t') ?? '*',
      from: headers?.get('f') ?? '',
      node: headers?.get('n') ?? '',
      nodeSeq: Number(headers?.get('q') ?? 0),
      frame: Buffer.from(bytes),
    };
  }
  const parts: string[] = [];
  let at = 1;
  for (let i = 0; i < 3; i++) {
    const end = skip(bytes, at);
    parts.push(bytes.toString('utf8', at + lengthBytes, end));
    at = end;
  }
  const [to = '*', from = '', node = ''] = parts;
  const nodeSeq = bytes.readDoubleBE(at);
  // a copy: the frame may wait in a receiver's queue, and must not hold NATS's read buffer
  return { seq, to, from, node, nodeSeq, frame: Buffer.from(bytes.subarray(at + nodeSeqBytes)) };
}

/** Whether `data` is a record sealed for `subject` with `seal` (a failure is counted there). */
export function isSealedRecord(data: Uint8Array, seal: RecordSeal, subject: string): boolean {
  if (data[0] !== sealedVersion) {
    seal.reject('frame');
    return false;
  }
  return seal.verify('frame', subject, data);
}
