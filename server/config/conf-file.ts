import { readFileSync } from 'node:fs';

/** One `KEY=VALUE` entry of a conf file, with the line it came from. */
export interface ConfEntry {
  key: string;
  value: string;
  line: number;
}

/** A user mistake in a configuration file: reported as one line, exit code 2. */
export class ConfigError extends Error {
  constructor(
    readonly file: string,
    readonly line: number | undefined,
    readonly key: string | undefined,
    readonly problem: string,
  ) {
    super(
      `${file}${line === undefined ? '' : `:${line}`}: ${key === undefined ? '' : `${key}: `}${problem}`,
    );
    this.name = 'ConfigError';
  }
}

/**
 * Parses the `KEY=VALUE` syntax shared by auth.conf and relay.conf: `#` comment lines, blank
 * lines, whitespace around key and value trimmed, optional single or double quotes around a
 * value. An unquoted value ends at ` #` (an inline comment); a quoted one keeps every character.
 */
export function parseConf(text: string, file: string): ConfEntry[] {
  const entries: ConfEntry[] = [];
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  for (const [index, raw] of lines.entries()) {
    const line = index + 1;
    const trimmed = raw.trim();
    if (trimmed === '' || trimmed.startsWith('#')) continue;
    const eq = trimmed.indexOf('=');
    if (eq <= 0) {
      throw new ConfigError(file, line, undefined, `expected KEY=VALUE, got "${clip(trimmed)}"`);
    }
    const key = trimmed.slice(0, eq).trim();
    if (!/^[A-Za-z][A-Za-z0-9_.-]*$/.test(key)) {
      throw new ConfigError(file, line, clip(key), 'not a valid key name');
    }
    entries.push({ key, value: unquote(trimmed.slice(eq + 1).trim(), file, line, key), line });
  }
  return entries;
}

function unquote(value: string, file: string, line: number, key: string): string {
  const quote = value[0];
  if (quote === '"' || quote === "'") {
    const end = value.indexOf(quote, 1);
    if (end === -1) throw new ConfigError(file, line, key, `unterminated ${quote} quote`);
    const rest = value.slice(end + 1).trim();
    if (rest !== '' && !rest.startsWith('#')) {
      throw new ConfigError(file, line, key, 'unexpected text after the closing quote');
    }
    return value.slice(1, end);
  }
  const comment = value.search(/\s#/);
  return comment === -1 ? value : value.slice(0, comment).trim();
}

function clip(text: string): string {
  return text.length > 40 ? `${text.slice(0, 40)}…` : text;
}

/** Reads a conf file; `undefined` when it does not exist, a ConfigError when it cannot be read. */
export function readConfFile(path: string, shownAs: string): ConfEntry[] | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err: unknown) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    throw new ConfigError(
      shownAs,
      undefined,
      undefined,
      `cannot read the file (${code ?? 'error'})`,
    );
  }
  return parseConf(text, shownAs);
}
