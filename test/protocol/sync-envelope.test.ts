import { describe, expect, it } from 'vitest';
import {
  envelopeIdAt,
  envelopeOf,
  envelopeTextMaxLength,
  envelopeTextStart,
} from '../../protocol/sync-envelope.ts';

describe('the _sync envelope', () => {
  it('is read from a parsed payload, and a malformed one is no envelope', () => {
    expect(envelopeOf({ a: 1, _sync: { s: 'abc', n: 7 } })).toEqual({ s: 'abc', n: 7 });
    expect(envelopeOf({ a: 1 })).toBeUndefined();
    expect(envelopeOf({ _sync: { s: 'abc', n: '7' } })).toBeUndefined();
    expect(envelopeOf({ _sync: null })).toBeUndefined();
  });

  it('is read from a frame text as written: session and counter as they stand', () => {
    const frame = '{"from":1,"to":2,"room":"r","payload":{"d":"x","_sync":{"s":"a1_B-","n":42}}}';
    const at = frame.indexOf(envelopeTextStart);
    expect(envelopeIdAt(frame.slice(at, at + envelopeTextMaxLength))).toBe('a1_B-.42');
    const big = '"_sync":{"s":"s","n":9999999999999999}';
    expect(envelopeIdAt(big)).toBe('s.9999999999999999');
  });

  it('refuses a session or counter it cannot use as a message id', () => {
    expect(envelopeIdAt('"_sync":{"s":"a.b","n":1}')).toBeUndefined();
    expect(envelopeIdAt(`"_sync":{"s":"${'x'.repeat(65)}","n":1}`)).toBeUndefined();
    expect(envelopeIdAt('"_sync":{"s":"a","n":12345678901234567}')).toBeUndefined();
    expect(envelopeIdAt('"_sync":{"s":"a","n":-1}')).toBeUndefined();
    expect(envelopeIdAt('"other":{"s":"a","n":1}')).toBeUndefined();
  });
});
