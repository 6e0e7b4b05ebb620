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
});
