import { createInterface } from 'node:readline';

/** Where the CLI reads and writes; the process's streams, replaceable in tests. */
export interface CliIo {
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
}

export const processIo: CliIo = {
  stdin: process.stdin,
  stdout: process.stdout,
  stderr: process.stderr,
};

/**
 * The first non-empty line of standard input (with a prompt on stderr when it is a terminal);
 * undefined at end of input.
 */
export async function readLine(io: CliIo, prompt: string): Promise<string | undefined> {
  const lines = createInterface({ input: io.stdin, terminal: false });
  if (io.stdin.isTTY) io.stderr.write(prompt);
  try {
    for await (const line of lines) {
      if (line.trim() !== '') return line.trim();
    }
    return undefined;
  } finally {
    lines.close();
  }
}

/**
 * An answer typed at the terminal with a default: `prompt [fallback]: ` on stderr, then one
 * line of standard input; an empty line or the end of input keeps `fallback`.
 */
export async function ask(io: CliIo, prompt: string, fallback: string): Promise<string> {
  const lines = createInterface({ input: io.stdin, terminal: false });
  io.stderr.write(`${prompt} [${fallback}]: `);
  try {
    for await (const line of lines) return line.trim() === '' ? fallback : line.trim();
    return fallback;
  } finally {
    lines.close();
  }
}

/** Ctrl-C, Ctrl-D, backspace and delete, as a terminal in raw mode sends them. */
const CTRL_C = '\u0003';
const CTRL_D = '\u0004';
const BACKSPACE = '\b';
const DELETE = '\u007f';

/**
 * A secret typed at the terminal (a passphrase), not echoed: the terminal is put in raw mode and
 * the characters are collected until Enter. Ctrl-C or Ctrl-D with nothing typed is no answer
 * (undefined). When standard input is not a terminal the first non-empty line is read, as
 * `readLine` does (a script pipes the secret in).
 */
export async function readSecret(io: CliIo, prompt: string): Promise<string | undefined> {
  const input = io.stdin as NodeJS.ReadStream;
  if (!input.isTTY || typeof input.setRawMode !== 'function') return readLine(io, prompt);
  input.setRawMode(true); // before the prompt: what is typed after it is never echoed
  io.stderr.write(prompt);
  try {
    return await new Promise<string | undefined>((resolve) => {
      let typed = '';
      const onData = (chunk: Buffer | string) => {
        for (const ch of String(chunk)) {
          if (ch === '\r' || ch === '\n' || ch === CTRL_C || ch === CTRL_D) {
            input.off('data', onData);
            input.pause();
            io.stderr.write('\n');
            resolve(ch === CTRL_C || typed === '' ? undefined : typed);
            return;
          }
          if (ch === BACKSPACE || ch === DELETE) typed = typed.slice(0, -1);
          else typed += ch;
        }
      };
      input.on('data', onData);
      input.resume();
    });
  } finally {
    input.setRawMode(false);
  }
}
