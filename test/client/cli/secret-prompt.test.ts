import { spawnSync } from 'node:child_process';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '..', '..', '..');

/**
 * Runs `readSecret` (or `readLine`) in a node process on a real pseudo-terminal (python3's pty
 * module plays the terminal), types `keys` into it, and returns everything the terminal showed
 * and what the function returned.
 */
function onTerminal(fn: 'readSecret' | 'readLine', keys: string): { shown: string; got: string } {
  const program = `
import { register } from 'tsx/esm/api';
register();
const io = await import(${JSON.stringify(join(root, 'client/cli/io.ts'))});
const got = await io.${fn}(io.processIo, 'Passphrase: ');
process.stdout.write('GOT[' + String(got) + ']');
process.exit(0);
`;
  const terminal = `
import os, pty, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], [sys.argv[1], '--input-type=module', '-e', sys.argv[2]])
out = b''
import select
while b'Passphrase: ' not in out:
    r, _, _ = select.select([fd], [], [], 30)
    if not r: break
    out += os.read(fd, 4096)
os.write(fd, sys.argv[3].encode())
while True:
    r, _, _ = select.select([fd], [], [], 30)
    if not r: break
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        break
    if not chunk: break
    out += chunk
os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors='replace'))
`;
  const run = spawnSync('python3', ['-c', terminal, process.execPath, program, keys], {
    cwd: root,
    encoding: 'utf8',
    timeout: 60_000,
  });
  const shown = run.stdout;
  const got = /GOT\[([^\]]*)\]/.exec(shown)?.[1] ?? `(no answer: ${shown} ${run.stderr})`;
  return { shown: shown.replace(/GOT\[[^\]]*\]/, ''), got };
}

describe('the passphrase prompt of sync --encrypt', () => {
  it('does not show what is typed, and takes backspace into account', { timeout: 90_000 }, () => {
    const { shown, got } = onTerminal('readSecret', 'correct horse xy\x7f\x7fbattery\r');
    expect(got).toBe('correct horse battery');
    expect(shown).toContain('Passphrase: ');
    expect(shown).not.toContain('horse');
  });

  it('is no answer on Ctrl-C', { timeout: 90_000 }, () => {
    expect(onTerminal('readSecret', 'half\x03').got).toBe('undefined');
  });

  it('can fail: a plain line read on the same terminal shows what is typed', {
    timeout: 90_000,
  }, () => {
    const { shown, got } = onTerminal('readLine', 'correct horse battery\r');
    expect(got).toBe('correct horse battery');
    expect(shown).toContain('horse');
  });
});
