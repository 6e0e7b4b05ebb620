import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  maxReportBytes,
  maxReportedNames,
  reportBytes,
  reportedNames,
} from '../../protocol/relay-frames.ts';

/**
 * The names a device puts in its folder report: the first ones, as many as fit the host's bound
 * on a report (counted as the host counts it, UTF-8), whatever the paths and the device's key.
 */
describe('reportedNames', () => {
  it('keeps every name of a small folder', () => {
    const names = ['a.txt', 'photos/été.jpg'];
    expect(reportedNames('folder', names)).toEqual(names);
  });

  it('cuts a folder of long paths to what fits', () => {
    const names = Array.from({ length: 2000 }, (_, i) => `${'dossier/'.repeat(37)}${i}.txt`);
    const kept = reportedNames('folder', names);
    expect(kept.length).toBeGreaterThan(800);
    expect(kept.length).toBeLessThan(names.length);
    expect(reportBytes({ doc: 'folder', device: '1'.repeat(64), names: kept })).toBeLessThanOrEqual(
      maxReportBytes,
    );
  });

  it('keeps the first names that fit the bound, never more than the frame takes', () => {
    const name = fc.string({ minLength: 1, maxLength: 4096, unit: 'grapheme' });
    fc.assert(
      fc.property(
        fc.array(name, { maxLength: 2500 }),
        fc.string({ maxLength: 64 }),
        (names, device) => {
          const kept = reportedNames('folder', names);
          expect(kept).toEqual(names.slice(0, kept.length));
          expect(kept.length).toBeLessThanOrEqual(maxReportedNames);
          expect(reportBytes({ doc: 'folder', device, names: kept })).toBeLessThanOrEqual(
            maxReportBytes,
          );
          // Not cut short: the next name would not have fit (or there is none, or the frame's cap).
          const next = names[kept.length];
          if (next !== undefined && kept.length < maxReportedNames) {
            const longer = reportBytes({
              doc: 'folder',
              device: 'x'.repeat(64),
              names: [...kept, next],
            });
            expect(longer).toBeGreaterThan(maxReportBytes - 4 * 64);
          }
        },
      ),
      { numRuns: 30 },
    );
  });
});
