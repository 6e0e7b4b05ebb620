import { describe, expect, it } from 'vitest';
import { printable, printableJson } from '../../../client/cli/printable.ts';

describe('printable', () => {
  it('writes C0 and C1 controls and DEL as \\xNN', () => {
    expect(printable('a\nb\rc\u0000d\u001b[2Je\u0007')).toBe('a\\x0ab\\x0dc\\x00d\\x1b[2Je\\x07');
    expect(printable('\u007f\u0080\u0085\u009b\u009f')).toBe('\\x7f\\x80\\x85\\x9b\\x9f');
  });

  it('writes bidi overrides, isolates and line separators as \\u{NNNN}', () => {
    expect(printable('report\u202egpj.exe')).toBe('report\\u{202e}gpj.exe');
    expect(printable('\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069')).toBe(
      '\\u{202a}\\u{202b}\\u{202c}\\u{202d}\\u{2066}\\u{2067}\\u{2068}\\u{2069}',
    );
    expect(printable('one\u2028two\u2029')).toBe('one\\u{2028}two\\u{2029}');
  });

  it('keeps other text as it is, non-ASCII and emoji included', () => {
    const text = 'Grüße, 東京 🙂 \u00a0 tab-free "quotes" \\ back';
    expect(printable(text)).toBe(text);
  });
});

describe('printableJson', () => {
  it('escapes what JSON.stringify leaves raw and parses back to the same value', () => {
    const value = { name: 'laptop\u202e\u0085\u007f', nested: ['\u001b[31m', 2] };
    const text = printableJson(value, 2);
    expect(text).not.toMatch(/[\u007f-\u009f\u202a-\u202e\u2066-\u2069]/);
    expect(text).toContain('"laptop\\u202e\\u0085\\u007f"');
    expect(JSON.parse(text)).toEqual(value);
    // Indentation stays (newlines between tokens are not escaped).
    expect(text.split('\n').length).toBeGreaterThan(3);
  });
});
