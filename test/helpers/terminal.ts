import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { resolve } from 'node:path';
import QRCode from 'qrcode';

const launcher = resolve(import.meta.dirname, '../../bin/sync-host');

/** Whether util-linux `script` is here to give a command a terminal (a pty). */
export const hasScript = spawnSync('script', ['--version'], { encoding: 'utf8' }).status === 0;

/** A shell word for `text`. */
const quoted = (text: string) => `'${text.replaceAll("'", `'\\''`)}'`;

/** A client command running in a terminal: what the terminal showed (echo included), its input. */
export interface TerminalRun {
  child: ChildProcessWithoutNullStreams;
  /** Everything written to the terminal (stdout and stderr together, `\r\n` line ends). */
  out: { text: string };
  /** Types `text` at the terminal. */
  type(text: string): void;
  exited: Promise<number | null>;
}

/**
 * Runs `bin/sync-host <args>` with a pty as its stdin, stdout and stderr (`script -qec … /dev/null`),
 * credentials in `configDir`: what a person at a terminal sees.
 */
export function spawnInTerminal(args: string[], configDir: string): TerminalRun {
  const command = [process.execPath, launcher, ...args].map(quoted).join(' ');
  const child = spawn('script', ['-qec', command, '/dev/null'], {
    env: { ...process.env, SYNC_HOST_CONFIG_DIR: configDir, LOG_LEVEL: 'warn' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const out = { text: '' };
  // Decoded as a stream: a character split between two reads (the QR code's blocks are three
  // bytes each) is whole in the text, not two replacement characters.
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    out.text += chunk;
  });
  child.stderr.on('data', (chunk: string) => {
    out.text += chunk;
  });
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  return { child, out, type: (text) => child.stdin.write(text), exited };
}

/**
 * The QR code of `text` as `login` draws it on a terminal, as the pty shows it (`\r\n` line
 * ends), without its last line end (the terminal may add attributes before it).
 */
export async function terminalQr(text: string): Promise<string> {
  const drawn = await QRCode.toString(text, { type: 'terminal', small: true });
  return drawn.replace(/\n$/, '').replaceAll('\n', '\r\n');
}
