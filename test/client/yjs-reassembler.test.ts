import { beforeAll, describe, expect, it } from 'vitest';
import { toBase64 } from '../../client/base64.ts';
import { deriveE2EKey, type E2EKey } from '../../client/e2e-key.ts';
import { type Assembled, Reassembler } from '../../client/yjs-reassembler.ts';
import type { Refusal } from '../../client/yjs-wire.ts';
import { encodePayloads, type YjsPayload } from '../../client/yjs-wire.ts';

const doc = 'notes';

/** Piece `i` of `n` of message `m`: `size` bytes of `fill`, with key check `kc` when given. */
function piece(m: string, i: number, n: number, size: number, kc?: string, fill = i): YjsPayload {
  const d = toBase64(new Uint8Array(size).fill(fill));
  return { y: 1, doc, ...(kc === undefined ? {} : { kc }), m, i, n, d };
}

function reassembler(check: string | undefined, maxBytes = 1_000_000) {
  const drops: Array<{ from: string } & Refusal> = [];
  const r = new Reassembler({
    check,
    maxMessageBytes: maxBytes,
    maxHeldBytes: maxBytes,
    onDrop: (from, refusal) => drops.push({ from, ...refusal }),
  });
  return { r, drops };
}

function refusedCode(assembled: Assembled): string | undefined {
  return assembled.kind === 'refused' ? assembled.refused : undefined;
}

describe('Reassembler', () => {
  let key: E2EKey;
  let other: E2EKey;

  beforeAll(async () => {
    key = await deriveE2EKey('right', 'room-1', 1_000);
    other = await deriveE2EKey('wrong', 'room-1', 1_000);
  });

  it('puts the pieces of an encrypted message back together and holds nothing after', async () => {
    const body = new Uint8Array(10_000).map((_, i) => i % 251);
    const payloads = await encodePayloads(body, { doc, key, chunkBytes: 3_000, id: 'a.1' });
    expect(payloads.length).toBe(4);
    const { r } = reassembler(key.check);
    const results = payloads.map((payload) => r.accept('7', payload));
    expect(results.slice(0, 3).map((a) => a.kind)).toEqual(['partial', 'partial', 'partial']);
    const last = results[3];
    expect(last?.kind).toBe('whole');
    if (last?.kind !== 'whole') return;
    expect(last.bytes.length).toBe(10_000 + 28); // nonce and tag
    expect(last.check).toBe(key.check);
    expect(r.heldBytes).toBe(0);
  });

  it('refuses a first piece with another key check, without keeping it', () => {
    const { r } = reassembler(key.check);
    for (let i = 0; i < 5; i += 1) {
      expect(refusedCode(r.accept('7', piece('x', i, 100, 1_000, other.check)))).toBe(
        'wrong_passphrase',
      );
      expect(r.heldBytes).toBe(0);
    }
  });

  it('refuses pieces without a key check when encrypted and with one when not', () => {
    const encrypted = reassembler(key.check).r;
    expect(refusedCode(encrypted.accept('7', piece('x', 0, 10, 1_000)))).toBe('not_encrypted');
    expect(encrypted.heldBytes).toBe(0);
    const plain = reassembler(undefined).r;
    expect(refusedCode(plain.accept('7', piece('x', 0, 10, 1_000, key.check)))).toBe('encrypted');
    expect(plain.heldBytes).toBe(0);
  });

  it('drops a message whose later piece carries another key check', () => {
    const { r } = reassembler(key.check);
    expect(r.accept('7', piece('x', 0, 3, 1_000, key.check)).kind).toBe('partial');
    expect(r.heldBytes).toBe(1_000);
    expect(refusedCode(r.accept('7', piece('x', 1, 3, 1_000, other.check)))).toBe(
      'wrong_passphrase',
    );
    expect(r.heldBytes).toBe(0);
    // The rest of it is not collected either: its start is gone.
    expect(r.accept('7', piece('x', 2, 3, 1_000, key.check)).kind).toBe('partial');
    expect(r.heldBytes).toBe(0);
  });

  it('refuses a message declared larger than the bound at its first piece', () => {
    const { r } = reassembler(undefined, 10_000);
    expect(r.accept('7', piece('x', 0, 10, 1_000)).kind).toBe('partial'); // exactly the bound
    r.forget('7');
    expect(refusedCode(r.accept('7', piece('y', 0, 11, 1_000)))).toBe('invalid_payload');
    expect(r.heldBytes).toBe(0);
  });

  it('refuses a piece larger than the first, an empty one or one that changes the count, and frees the message', () => {
    const { r } = reassembler(undefined, 10_000);
    r.accept('7', piece('x', 0, 5, 1_000));
    expect(refusedCode(r.accept('7', piece('x', 1, 5, 1_001)))).toBe('invalid_payload');
    expect(r.heldBytes).toBe(0);
    r.accept('7', piece('y', 0, 2, 1_000));
    expect(refusedCode(r.accept('7', piece('y', 1, 1_000, 10)))).toBe('invalid_payload');
    expect(r.heldBytes).toBe(0);
    r.accept('7', piece('z', 0, 5, 1_000));
    expect(refusedCode(r.accept('7', piece('z', 1, 5, 0)))).toBe('invalid_payload');
    expect(r.heldBytes).toBe(0);
  });

  it('drops the largest unfinished message when all together pass the bound', () => {
    const { r, drops } = reassembler(undefined, 10_000);
    for (let i = 0; i < 4; i += 1) r.accept('1', piece('a', i, 5, 2_000));
    for (let i = 0; i < 3; i += 1) r.accept('2', piece('b', i, 5, 1_000));
    expect(drops.map((d) => [d.from, d.refused])).toEqual([['1', 'receive_limit']]);
    expect(r.heldBytes).toBe(3_000);
    // The other sender's message goes on.
    r.accept('2', piece('b', 3, 5, 1_000));
    const last = r.accept('2', piece('b', 4, 5, 500));
    expect(last.kind).toBe('whole');
    expect(r.heldBytes).toBe(0);
  });

  it('forgets one sender, the senders not in a list, or everyone', () => {
    const { r } = reassembler(undefined);
    r.accept('1', piece('a', 0, 5, 100));
    r.accept('2', piece('b', 0, 5, 200));
    r.accept('3', piece('c', 0, 5, 400));
    r.forget('1');
    expect(r.heldBytes).toBe(600);
    r.keepOnly(['3', '9']);
    expect(r.heldBytes).toBe(400);
    r.clear();
    expect(r.heldBytes).toBe(0);
  });
});
