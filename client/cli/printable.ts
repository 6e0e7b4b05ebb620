/**
 * Text from elsewhere (device names, file and room names, relay and service messages) made safe
 * to print on a terminal: a control character could move the cursor, clear the screen, set the
 * window title or fake a line of our own, and a bidi override could make `txt.exe` read as
 * `exe.txt`. Such characters are shown as escapes instead.
 */

/** C0 and C1 controls and DEL: a terminal acts on them. */
function isControl(code: number): boolean {
  return code <= 0x1f || (code >= 0x7f && code <= 0x9f);
}

/** Bidi embeddings, overrides and isolates, and the line and paragraph separators. */
function isReordering(code: number): boolean {
  return (
    (code >= 0x202a && code <= 0x202e) ||
    (code >= 0x2066 && code <= 0x2069) ||
    code === 0x2028 ||
    code === 0x2029
  );
}

function hex(code: number, width: number): string {
  return code.toString(16).padStart(width, '0');
}

/**
 * `text` with C0 and C1 control characters and DEL written as `\xNN`, and the bidi overrides
 * and isolates (U+202A–U+202E, U+2066–U+2069) and the line and paragraph separators
 * (U+2028, U+2029) as `\u{NNNN}`. Everything else, other non-ASCII text included, is kept.
 */
export function printable(text: string): string {
  let out = '';
  for (const char of text) {
    const code = char.codePointAt(0)!;
    if (isControl(code)) out += `\\x${hex(code, 2)}`;
    else if (isReordering(code)) out += `\\u{${hex(code, 4)}}`;
    else out += char;
  }
  return out;
}

/**
 * `value` as JSON (indented by `indent`) that is safe on a terminal: on top of what
 * `JSON.stringify` escapes (C0 controls), DEL, C1 controls, bidi overrides and the line
 * separators are written as `\uNNNN`, so the text parses back to the same value.
 */
export function printableJson(value: unknown, indent?: number): string {
  let out = '';
  for (const char of JSON.stringify(value, null, indent)) {
    const code = char.codePointAt(0)!;
    // Below DEL: JSON.stringify escaped those in strings; outside them they are indentation.
    out += (code >= 0x7f && isControl(code)) || isReordering(code) ? `\\u${hex(code, 4)}` : char;
  }
  return out;
}
