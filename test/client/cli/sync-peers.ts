import { mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { WebSocket } from 'ws';
import * as Y from 'yjs';
import { folderDocName } from '../../../client/folder/document.ts';
import { folderMarker } from '../../../client/folder/folder-sync.ts';
import { createRelayConnection, type RelayConnection } from '../../../client/relay-connection.ts';
import { createYjsProvider, type YjsProvider } from '../../../client/yjs-provider.ts';
import { textFiles } from '../../folder/devices.ts';
import { type CliRun, createCliRunner } from '../../helpers/cli-process.ts';
import { registerProject, startTestHost, type TestHost } from '../../helpers/host.ts';
import { eventually } from '../../helpers/wait.ts';

/** A device of the test user with its own config folder, logged in with the CLI. */
export interface CliDevice {
  name: string;
  deviceId: number;
  deviceToken: string;
  config: string;
}

/**
 * Another device of the same user that speaks the folder document through the client library
 * and writes whatever it likes into its `files` map: what a compromised or buggy device sends.
 * Every update it receives is kept, to check what the other devices sent it.
 */
export class Attacker {
  readonly received: Uint8Array[] = [];
  get files(): Y.Map<unknown> {
    return this.doc.getMap<unknown>('files');
  }

  private constructor(
    private readonly connection: RelayConnection,
    private readonly provider: YjsProvider,
    readonly doc: Y.Doc,
  ) {
    // Its own edits have no origin; everything else came from the room.
    doc.on('update', (update: Uint8Array, origin: unknown) => {
      if (origin !== null) this.received.push(update);
    });
  }

  static async join(th: TestHost, roomId: string, device: CliDevice): Promise<Attacker> {
    const connection = createRelayConnection({
      url: th.relayUrl,
      room: roomId,
      device: String(device.deviceId),
      token: device.deviceToken,
      WebSocket,
      backoff: { initialDelayMs: 20, maxDelayMs: 200 },
    });
    const doc = new Y.Doc();
    const provider = await createYjsProvider({ connection, doc, name: folderDocName });
    const attacker = new Attacker(connection, provider, doc);
    await connection.connect();
    await provider.whenSynced();
    return attacker;
  }

  /** A file entry as an honest device makes it, with `fields` overriding any of its values. */
  entry(path: unknown, content = 'x\n', fields: Record<string, unknown> = {}): string {
    const id = `e${Math.random().toString(16).slice(2)}`;
    const map = new Y.Map<unknown>();
    const values: Record<string, unknown> = {
      path,
      text: new Y.Text(content),
      time: Date.now(),
      device: String(this.connection.device),
      ...fields,
    };
    this.doc.transact(() => {
      for (const [key, value] of Object.entries(values)) {
        if (value !== undefined) map.set(key, value);
      }
      this.files.set(id, map);
    });
    return id;
  }

  /** The live entry ids whose path is `path`. */
  idsOf(path: string): string[] {
    return [...this.files.entries()]
      .filter(([, value]) => value instanceof Y.Map && value.get('path') === path)
      .map(([id]) => id);
  }

  /** Marks the entry deleted, as a device that deleted the file does. */
  tombstone(id: string): void {
    const map = this.files.get(id);
    if (map instanceof Y.Map) map.set('deleted', 'f'.repeat(32));
  }

  /** Whether `needle` is in anything the other devices sent or in the document. */
  saw(needle: string): boolean {
    const bytes = Buffer.concat(this.received.map((u) => Buffer.from(u)));
    return (
      bytes.includes(Buffer.from(needle)) || JSON.stringify(this.files.toJSON()).includes(needle)
    );
  }

  async close(): Promise<void> {
    this.provider.destroy();
    await this.connection.close({ leave: false });
  }
}

/**
 * Every file, folder and link under `dir`, with file contents and link targets: a snapshot to
 * compare before and after (`skip`: relative paths left out, with what is under them).
 */
export function tree(dir: string, skip: string[] = []): Record<string, string> {
  const found: Record<string, string> = {};
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    const path = relative(dir, join(entry.parentPath, entry.name));
    if (skip.some((s) => path === s || path.startsWith(`${s}/`))) continue;
    if (path === folderMarker) continue; // written by sync at its first start
    const full = join(dir, path);
    if (entry.isSocket()) continue; // the control socket of a running sync
    if (entry.isSymbolicLink()) found[path] = `link → ${readlinkSync(full)}`;
    else if (entry.isDirectory()) found[path] = 'folder';
    else found[path] = readFileSync(full, 'latin1');
  }
  return found;
}

/**
 * The host, the user's devices and the CLI processes of one test file: a host for the file, a
 * project (a room of its own) per test, every process killed after each test.
 */
export function syncScope(email: string) {
  const runner = createCliRunner();
  const temps: string[] = [];
  const attackers: Attacker[] = [];
  let th: TestHost | undefined;
  let projects = 0;

  beforeAll(async () => {
    th = await startTestHost({ ui: false });
  });
  afterEach(async () => {
    runner.killAll();
    for (const attacker of attackers.splice(0)) await attacker.close();
  });
  afterAll(async () => {
    await th?.close();
    for (const dir of temps) rmSync(dir, { recursive: true, force: true });
  });

  const host = () => {
    if (th === undefined) throw new Error('the host is not started');
    return th;
  };

  return {
    host,
    tempDir(): string {
      const dir = mkdtempSync(join(tmpdir(), 'sync-peers-'));
      temps.push(dir);
      return dir;
    },
    /** A new device of the user; logged in with the CLI when `config` (its config folder) is given. */
    async device(name: string, config?: string): Promise<CliDevice> {
      const signed = await host().signIn(email, name);
      if (config !== undefined) {
        mkdirSync(config, { recursive: true });
        const login = await runner.cli(
          ['login', '--auth', host().base, '--token', signed.deviceToken],
          config,
        );
        expect(login.code).toBe(0);
      }
      return { name, config: config ?? '', ...signed };
    },
    /** A new project (its own room); resolves with its key and room id. */
    async project(owner: CliDevice): Promise<{ key: string; roomId: string }> {
      projects += 1;
      const key = `folder-${projects}`;
      const { roomId } = await registerProject(host().base, owner.deviceToken, key);
      return { key, roomId };
    },
    /** `sync <key> <dir>` on `device`, resolved once it watches the folder. */
    async sync(
      device: CliDevice,
      key: string,
      dir: string,
      env: Record<string, string> = {},
    ): Promise<CliRun> {
      const run = runner.spawnCli(
        ['sync', key, dir, '--relay', host().relayUrl],
        device.config,
        env,
      );
      await eventually(
        () => run.out.stdout.includes('watching') || run.child.exitCode !== null,
        `${device.name} watching`,
        15_000,
      );
      expect(run.child.exitCode, run.out.stderr).toBeNull();
      return run;
    },
    async attacker(roomId: string, device: CliDevice): Promise<Attacker> {
      const attacker = await Attacker.join(host(), roomId, device);
      attackers.push(attacker);
      return attacker;
    },
  };
}

/** Reads a file, or undefined when it is not there (or is not a file). */
export function readIf(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * Waits until every folder holds the same text files, twice in a row 200 ms apart (so a
 * conflict copy or a duplicate on its way is seen); resolves with them.
 */
export async function agreed(dirs: string[], deadlineMs = 20_000): Promise<Record<string, string>> {
  let last = '';
  let lastAt = 0;
  return eventually(
    () => {
      const listings = dirs.map((dir) => JSON.stringify(textFiles(dir)));
      const first = listings[0]!;
      if (first === undefined || !listings.every((l) => l === first)) {
        last = '';
        return undefined;
      }
      if (first !== last) {
        last = first;
        lastAt = Date.now();
        return undefined;
      }
      return Date.now() - lastAt >= 200 ? (JSON.parse(first) as Record<string, string>) : undefined;
    },
    'the folders alike',
    deadlineMs,
  );
}
