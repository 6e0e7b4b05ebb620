/** Control characters (C0, DEL, C1) and the bidirectional overrides that reorder a line. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it finds
const unprintable = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/**
 * `text` safe to print on a terminal: every control character and bidirectional override is
 * shown as an escape (`\x1b`, `\u{202e}`), so a name that came from elsewhere cannot move the
 * cursor, recolour the screen or hide part of a line.
 */
export function printable(text: string): string {
  return text.replace(unprintable, (ch) => {
    const code = ch.codePointAt(0) ?? 0;
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u{${code.toString(16)}}`;
  });
}
