import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { WebSocket } from 'ws';
import { deriveE2EKey } from '../../client/e2e-key.ts';
import { listenNotices } from '../../client/folder/blob-notices.ts';
import { blobTransferOf } from '../../client/folder/blob-transfer.ts';
import { folderDocName } from '../../client/folder/document.ts';
import { FolderSync, type FolderSyncOptions } from '../../client/folder/folder-sync.ts';
import { createRelayConnection, type RelayConnection } from '../../client/relay-connection.ts';
import { createYjsProvider, type YjsProvider } from '../../client/yjs-provider.ts';
import { registerProject, startTestHost, type TestHost } from '../helpers/host.ts';
import { eventually } from '../helpers/wait.ts';

/** A signed-in device of the test user. */
export interface DeviceCredential {
  deviceId: number;
  deviceToken: string;
}

/**
 * A device's folder options, its passphrase, and whether it fetches other devices' uploads
 * under way ahead (`prefetch`, on unless false, as in the CLI).
 */
export type DeviceOptions = Partial<FolderSyncOptions> & {
  passphrase?: string;
  prefetch?: boolean;
};

/**
 * One device running the folder sync in this process, as `sync-host sync` runs it: a FolderSync
 * on its folder and state log, a provider of the folder document on a real relay connection.
 * `stop()` is a clean stop, `kill()` what `kill -9` leaves (nothing saved beyond what was).
 */
export class FolderDevice {
  folder: FolderSync | undefined;
  private provider: YjsProvider | undefined;
  private connection: RelayConnection | undefined;
  private transfer: { close(): void } | undefined;
  /** Set by `crashAtNextBatch`: the next batch recorded kills this device before its files change. */
  private crashArmed = false;
  readonly lines: string[] = [];

  constructor(
    readonly th: TestHost,
    readonly roomId: string,
    readonly credential: DeviceCredential,
    readonly dir: string,
    readonly stateFile: string,
    private readonly options: DeviceOptions = {},
  ) {
    mkdirSync(dir, { recursive: true });
  }

  get running(): boolean {
    return this.folder !== undefined;
  }

  get joined(): boolean {
    return this.connection?.state === 'joined';
  }

  async start(): Promise<void> {
    if (this.folder !== undefined) return;
    const connection = createRelayConnection({
      url: this.th.relayUrl,
      room: this.roomId,
      device: String(this.credential.deviceId),
      token: this.credential.deviceToken,
      WebSocket,
      backoff: { initialDelayMs: 20, maxDelayMs: 200 },
    });
    const key =
      this.options.passphrase === undefined
        ? undefined
        : await deriveE2EKey(this.options.passphrase, this.roomId);
    // As the CLI wires it: chunks the host dropped as damaged are put back from the files here.
    const transfer = blobTransferOf(connection, key, (ids) => void folder.chunksLost(ids));
    const folder = new FolderSync({
      dir: realpathSync(this.dir),
      stateFile: this.stateFile,
      device: String(this.credential.deviceId),
      log: ({ line }) => this.lines.push(line),
      transfer: () => (connection.state === 'joined' ? transfer : undefined),
      ...this.options,
      onRecorded: () => {
        this.options.onRecorded?.();
        if (!this.crashArmed) return;
        this.crashArmed = false;
        this.lines.push('(killed after recording a batch, before its files changed)');
        void this.kill();
        throw new Error('killed after recording a batch');
      },
    });
    connection.on('joined', () => folder.resume());
    // Notices of other devices' uploads under way: their chunks fetched ahead, as the CLI does.
    const stopNotices =
      this.options.prefetch === false
        ? () => undefined
        : listenNotices(connection, key, (from, notice) => folder.prefetch(from, notice));
    this.transfer = {
      close() {
        stopNotices();
        transfer.close();
      },
    };
    folder.guarded(() => folder.scan());
    this.folder = folder;
    this.connection = connection;
    this.provider = await createYjsProvider({
      connection,
      doc: folder.shared,
      name: folderDocName,
      passphrase: this.options.passphrase,
    });
    connection.connect().catch(() => {
      // Closed by stop() or kill().
    });
  }

  /** Resolves once the relay confirmed what this device sent so far. */
  async flush(): Promise<void> {
    await this.provider?.flush();
  }

  /** A scan now (the CLI's watcher and rescan timer do this by themselves). */
  scan(): void {
    this.folder?.guarded(() => this.folder?.scan());
  }

  /** What the CLI's watcher does for an event naming `path`: read that path now. */
  notice(path: string): void {
    this.folder?.notice(path);
    this.folder?.guarded(() => this.folder?.scanNoticed());
  }

  async stop(): Promise<void> {
    this.crashArmed = false;
    this.folder?.close();
    await this.disconnect();
  }

  /**
   * What `kill -9` in the middle of writing a batch of other devices' changes leaves: the next
   * batch is recorded in the state log (its temporary files written), then the device dies
   * before any file is put in place. Nothing when the device is not running; `false` disarms.
   */
  crashAtNextBatch(armed = true): void {
    this.crashArmed = armed && this.folder !== undefined;
  }

  async kill(): Promise<void> {
    this.crashArmed = false;
    this.folder?.halt();
    await this.disconnect();
  }

  private async disconnect(): Promise<void> {
    this.provider?.destroy();
    this.transfer?.close();
    const connection = this.connection;
    this.folder = undefined;
    this.provider = undefined;
    this.connection = undefined;
    if (connection !== undefined && connection.state !== 'closed') {
      await connection.close({ leave: false });
    }
  }
}

/**
 * Every text file under `dir` by relative path (dot files left out, and `.dat` files unless
 * `withBinary`: then read as latin1), or undefined when a file vanished while reading (the sync
 * is still writing).
 */
export function textFiles(dir: string, withBinary = false): Record<string, string> | undefined {
  // Pairs, not an object's keys: a file named __proto__ is listed like any other.
  const files: [string, string][] = [];
  let entries: import('node:fs').Dirent[];
  try {
    entries = readdirSync(dir, { recursive: true, withFileTypes: true });
  } catch {
    return undefined;
  }
  for (const entry of entries) {
    if (!entry.isFile() || entry.name.startsWith('.')) continue;
    const binary = entry.name.endsWith('.dat');
    if (binary && !withBinary) continue;
    const path = relative(dir, join(entry.parentPath, entry.name));
    if (path.split('/').some((part) => part.startsWith('.'))) continue;
    try {
      files.push([path, readFileSync(join(dir, path), binary ? 'latin1' : 'utf8')]);
    } catch {
      return undefined;
    }
  }
  return Object.fromEntries(files.sort(([a], [b]) => (a < b ? -1 : 1)));
}

/**
 * A test host with two signed-in devices of one user and a temporary root, started before the
 * file's tests and closed after them; `twoDevices()` makes a fresh project and its two
 * (unstarted) devices, each with a folder and a state log under the root.
 */
export function twoDeviceFixture(name: string) {
  const { fixture, devices } = deviceFixture(name, 2);
  const twoDevices = async (options: DeviceOptions = {}) =>
    (await devices(options)) as [FolderDevice, FolderDevice];
  return { fixture, twoDevices };
}

/**
 * A test host and `count` devices of one user (signed in once for the file); `devices` makes a
 * fresh project and one `FolderDevice` per credential on it, not started.
 */
export function deviceFixture(name: string, count: number) {
  const fixture = {
    th: undefined as unknown as TestHost,
    credentials: [] as DeviceCredential[],
    root: '',
    projects: 0,
  };
  beforeAll(async () => {
    fixture.th = await startTestHost({ ui: false });
    fixture.root = mkdtempSync(join(tmpdir(), `${name}-`));
    for (let i = 0; i < count; i += 1) {
      const device = `${name}-${String.fromCharCode(97 + i)}`;
      fixture.credentials.push(await fixture.th.signIn(`${name}@example.org`, device));
    }
  });
  afterAll(async () => {
    await fixture.th?.close();
    if (fixture.root !== '') rmSync(fixture.root, { recursive: true, force: true });
  });
  const devices = async (options: DeviceOptions = {}): Promise<FolderDevice[]> => {
    fixture.projects += 1;
    const { th, credentials, root, projects } = fixture;
    const { roomId } = await registerProject(
      th.base,
      credentials[0]!.deviceToken,
      `${name}-${projects}`,
    );
    const base = join(root, `project-${projects}`);
    return credentials.map(
      (credential, i) =>
        new FolderDevice(
          th,
          roomId,
          credential,
          join(base, `folder-${i}`),
          join(base, `state-${i}.log`),
          options,
        ),
    );
  };
  return { fixture, devices };
}

/** Writes a file in a folder, making the folders above it. */
export function putFile(dir: string, path: string, content: string | Uint8Array): void {
  mkdirSync(dirname(join(dir, path)), { recursive: true });
  writeFileSync(join(dir, path), content);
}

/** Waits until `device` has sent every file it read (uploaded and in the document). */
export async function allSent(device: FolderDevice, what: string): Promise<void> {
  await eventually(
    () => {
      device.scan();
      const status = device.folder?.folderStatus();
      return status !== undefined && status.blobsUp.files === 0;
    },
    what,
    60_000,
  );
}
