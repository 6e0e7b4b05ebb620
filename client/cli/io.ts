import { createInterface } from 'node:readline';

/** Where the CLI reads and writes; the process's streams, replaceable in tests. */
export interface CliIo {
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
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
