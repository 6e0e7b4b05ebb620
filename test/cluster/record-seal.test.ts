import { createHmac, hkdfSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { RecordSeal } from '../../server/cluster/record-seal.ts';
import { captureLogger } from '../helpers/capture.ts';

describe('record seal', () => {
  it('opens what it sealed, and nothing moved to another name or kind, altered or sealed with another secret', () => {
    const { logger, lines } = captureLogger('warn');
    const seal = new RecordSeal('the-shared-secret-0123456789abcdef', logger);
    const sealed = seal.seal('roster', 'room.device', '{"state":"present"}');
    expect(seal.openText('roster', 'room.device', sealed)).toBe('{"state":"present"}');
    expect(seal.openText('roster', 'room.other', sealed)).toBeUndefined();
    expect(seal.openText('revocation', 'room.device', sealed)).toBeUndefined();
    const altered = Buffer.from(sealed);
    altered[3] = (altered[3] ?? 0) ^ 1;
    expect(seal.open('roster', 'room.device', altered)).toBeUndefined();
    const other = new RecordSeal('another-secret-0123456789abcdef0');
    expect(other.open('roster', 'room.device', sealed)).toBeUndefined();
    expect(seal.open('roster', 'room.device', Buffer.from('short'))).toBeUndefined();
    expect(seal.rejected).toBe(4);
    // said once, with the count; the next ones within the minute only counted
    expect(lines.filter((l) => l.includes('without the shared secret’s seal'))).toHaveLength(1);
  });

  it('is HMAC-SHA-256 over the kind, the name and the bytes, so records of every node open alike', () => {
    const secret = 'the-shared-secret-0123456789abcdef';
    const key = Buffer.from(hkdfSync('sha256', secret, 'sync-host cluster', 'record seal v1', 32));
    const seal = new RecordSeal(secret);
    for (const data of [
      Buffer.alloc(0),
      Buffer.from('{"from":1,"to":"broadcast"}'),
      Buffer.alloc(300, 7),
    ]) {
      const expected = createHmac('sha256', key)
        .update('frame\0sync-host.m.0123abcd\0')
        .update(data)
        .digest();
      expect(seal.tag('frame', 'sync-host.m.0123abcd', data)).toEqual(expected);
    }
    expect(seal.tag('roster', 'ré.sumé', Buffer.from('x'))).toEqual(
      createHmac('sha256', key).update('roster\0ré.sumé\0').update('x').digest(),
    );
  });
});
