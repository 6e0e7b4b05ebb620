import { createHash } from 'node:crypto';
import { appendFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { defaultReceiveLimits } from '../../../client/folder/receive-budget.ts';
import { type CliRun, createCliRunner } from '../../helpers/cli-process.ts';
import { registerProject } from '../../helpers/host.ts';
import { hostDir, type RunningHost, startHostProgram } from '../../helpers/host-process.ts';
import { tempDirMaker } from '../../helpers/temp-dirs.ts';
import { eventually } from '../../helpers/wait.ts';
import { signIn } from '../host.ts';
import { tree } from './sync-peers.ts';

/**
 * A large folder through the host alone: device A sends every file up and stops, then device
 * B starts on an empty folder with A gone and the relay's buffer expired, so what B writes came
 * from the host's document and chunk stores.
 *
 * MANY_FILES sets the number of files (default 20,000). Past what a device takes from others
 * in one minute (defaultReceiveLimits) B holds the rest back and takes more each minute, so the
 * deadlines grow by a minute for each minute's worth of files more.
 */

const fileCount = Number(process.env.MANY_FILES ?? 20_000);
const binaryFileCount = 8;
const textFileCount = fileCount - binaryFileCount;
const filesPerFolder = 100;
const heldMinutes = Math.ceil(fileCount / defaultReceiveLimits.filesPerMinute) - 1;

const runner = createCliRunner();
const tempDir = tempDirMaker('sync-many-');
const email = 'vault@example.org';

const bufferExpired = () => new Promise((resolve) => setTimeout(resolve, 2_500));

/**
 * The text of note `n`: 1 to 17 lines of a few dozen bytes each (some with characters of two
 * and three bytes), up to about 1 KiB, none like another note's.
 */
function noteText(n: number): string {
  const lines = 1 + ((n * 7_919) % 17);
  const parts: string[] = [];
  for (let line = 0; line < lines; line += 1) {
    const digest = createHash('sha256').update(`${n}:${line}`).digest('hex');
    const accent = line % 5 === 4 ? ' café ✓' : '';
    parts.push(`note ${n} line ${line}: ${digest.slice(0, 8 + ((n + line) % 40))}${accent}\n`);
  }
  return parts.join('');
}

/** 2 to 12 KiB that are not text (NUL and invalid UTF-8 among them), different for each `n`. */
function binaryBytes(n: number): Buffer {
  const pieces: Buffer[] = [Buffer.from([0x00, 0xff, 0xfe, n])];
  for (let i = 0; pieces.length * 32 < 2_048 + n * 1_500; i += 1) {
    pieces.push(createHash('sha256').update(`binary ${n} ${i}`).digest());
  }
  return Buffer.concat(pieces);
}

/**
 * Writes the folder into `dir`: the notes in folders of `filesPerFolder` under ten top folders,
 * and the binary files in one more; returns what `tree` must find there.
 */
function writeFolder(dir: string): Record<string, string> {
  const expected: Record<string, string> = {};
  for (let n = 0; n < textFileCount; n += 1) {
    const folder = Math.floor(n / filesPerFolder);
    const top = `area-${folder % 10}`;
    const sub = `${top}/folder-${folder}`;
    if (expected[sub] === undefined) {
      mkdirSync(join(dir, sub), { recursive: true });
      expected[top] = 'folder';
      expected[sub] = 'folder';
    }
    const path = `${sub}/note-${n}.md`;
    const text = noteText(n);
    writeFileSync(join(dir, path), text);
    expected[path] = Buffer.from(text).toString('latin1');
  }
  mkdirSync(join(dir, 'images'));
  expected.images = 'folder';
  for (let n = 0; n < binaryFileCount; n += 1) {
    const bytes = binaryBytes(n);
    writeFileSync(join(dir, 'images', `picture-${n}.bin`), bytes);
    expected[`images/picture-${n}.bin`] = bytes.toString('latin1');
  }
  return expected;
}

/** What `found` lacks, has besides, or holds with other bytes than `expected` (ten at most). */
function differences(expected: Record<string, string>, found: Record<string, string>): string[] {
  const wrong: string[] = [];
  for (const [path, content] of Object.entries(expected)) {
    if (!(path in found)) wrong.push(`missing ${path}`);
    else if (found[path] !== content) wrong.push(`other bytes in ${path}`);
  }
  for (const path of Object.keys(found)) if (!(path in expected)) wrong.push(`extra ${path}`);
  return wrong.slice(0, 10);
}

describe(`sync-host sync of a folder of ${fileCount.toLocaleString('en')} small files`, () => {
  let host: RunningHost;
  const config = { a: '', b: '' };
  const tokens = { a: '', b: '' };
  let dir = '';

  beforeAll(async () => {
    dir = hostDir();
    appendFileSync(join(dir, 'relay.conf'), '\nbuffer.seconds=2\n');
    host = await startHostProgram(dir);
    for (const name of ['a', 'b'] as const) {
      tokens[name] = (await signIn(host, email, name)).deviceToken;
      config[name] = tempDir();
      const login = await runner.cli(
        ['login', '--auth', host.authUrl, '--token', tokens[name]],
        config[name],
      );
      expect(login.code, login.stderr).toBe(0);
    }
  });

  afterEach(() => runner.killAll());

  afterAll(async () => {
    await host?.process.stop('SIGKILL').catch(() => null);
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  /**
   * `sync` of device `which`, resolved once it says it is in sync with the host and, if it held
   * new files back, that every held file is written.
   */
  async function syncUntilWritten(which: 'a' | 'b', key: string, folder: string): Promise<CliRun> {
    const run = runner.spawnCli(['sync', key, folder, '--relay', host.relayUrl], config[which]);
    await eventually(
      () =>
        (run.out.stdout.includes('in sync') &&
          (!run.out.stderr.includes('holding') ||
            run.out.stdout.includes('every held file is written'))) ||
        run.child.exitCode !== null,
      `${which} in sync`,
      120_000 + heldMinutes * 60_000,
    );
    expect(run.child.exitCode, run.out.stderr).toBeNull();
    return run;
  }

  /** Waits until the `sync` of device `which` says nothing it read waits to go up. */
  async function confirmed(which: 'a' | 'b', key: string): Promise<void> {
    await eventually(
      async () => {
        const status = await runner.cli(['status', key, '--json'], config[which]);
        const fields = JSON.parse(status.stdout || '{}') as {
          inSync?: boolean;
          waitingUp?: { files: number };
        };
        return fields.inSync === true && fields.waitingUp?.files === 0;
      },
      `every file of ${which} confirmed by the host`,
      60_000,
    );
  }

  it(
    'reaches a device that starts later, from the host alone, byte for byte',
    async () => {
      const key = 'vault';
      await registerProject(host.authUrl, tokens.a, key);
      const folderA = tempDir();
      const folderB = tempDir();
      const expected = writeFolder(folderA);

      const a = await syncUntilWritten('a', key, folderA);
      // In sync: the host stored the folder document; the binary files' chunks may still go up.
      await confirmed('a', key);
      a.child.kill('SIGTERM');
      expect(await a.exited, a.out.stderr).toBe(0);
      expect(a.out.stderr).toBe('');
      await bufferExpired();

      const b = await syncUntilWritten('b', key, folderB);
      // In sync comes once what the catch-up brought is written; a while longer for a last write.
      const until = Date.now() + 20_000;
      const wrong = await eventually(
        () => {
          const found = differences(expected, tree(folderB));
          return found.length === 0 || Date.now() > until ? found : undefined;
        },
        'B compared',
        30_000,
      );
      expect(wrong).toEqual([]);
      // Nothing went wrong on B; a folder over a minute's worth of new files says it held some.
      expect(
        b.out.stderr.split('\n').filter((line) => line !== '' && !line.startsWith('holding ')),
      ).toEqual([]);
      expect(b.out.stderr.includes('holding ')).toBe(heldMinutes > 0);
      b.child.kill('SIGTERM');
      expect(await b.exited, b.out.stderr).toBe(0);
    },
    240_000 + heldMinutes * 60_000,
  );
});
