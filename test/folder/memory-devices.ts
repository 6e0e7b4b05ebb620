import * as Y from 'yjs';
import type { FileSystem } from '../../client/folder/file-system.ts';
import { FolderSync } from '../../client/folder/folder-sync.ts';
import type { ModelDevice } from './folder-model.ts';

/**
 * Folder engines run in this process with no host: each a FolderSync on a file system of the
 * test's (in memory, or with faults), their folder documents exchanged through an in-memory room
 * that stands for the relay and the host's store.
 */

/** The relay and the host's store: every update kept, and passed to the devices joined. */
export class MemoryRoom {
  readonly host = new Y.Doc();
  private readonly members = new Set<MemoryDevice>();

  join(device: MemoryDevice, shared: Y.Doc): void {
    this.members.add(device);
    device.inbox.push(Y.encodeStateAsUpdate(this.host));
    this.send(device, Y.encodeStateAsUpdate(shared));
  }

  leave(device: MemoryDevice): void {
    this.members.delete(device);
  }

  send(from: MemoryDevice, update: Uint8Array): void {
    Y.applyUpdate(this.host, update);
    for (const member of this.members) if (member !== from) member.inbox.push(update);
  }
}

export class MemoryDevice implements ModelDevice {
  folder: FolderSync | undefined;
  /** Updates of the others the network has not delivered yet. */
  inbox: Uint8Array[] = [];
  readonly lines: string[] = [];
  private crashArmed = false;

  constructor(
    private readonly fs: FileSystem,
    private readonly room: MemoryRoom,
    private readonly id: number,
    readonly dir: string,
    private readonly stateFile: string,
    private readonly now?: () => number,
  ) {
    fs.mkdir(dir, { recursive: true });
  }

  async start(): Promise<void> {
    if (this.folder !== undefined) return;
    const folder = new FolderSync({
      dir: this.dir,
      stateFile: this.stateFile,
      device: String(this.id),
      fs: this.fs,
      now: this.now,
      limits: { filesPerMinute: 100_000, bytesPerMinute: 1 << 30 },
      log: ({ line }) => this.lines.push(line),
      onRecorded: () => {
        if (!this.crashArmed) return;
        this.crashArmed = false;
        this.lines.push('(killed after recording a batch, before its files changed)');
        void this.kill();
        throw new Error('killed after recording a batch');
      },
    });
    folder.shared.on('update', (update: Uint8Array, origin: unknown) => {
      if (origin !== this.room && this.folder === folder) this.room.send(this, update);
    });
    // As `sync` does: the folder read first, then the room joined.
    folder.guarded(() => folder.scan());
    this.folder = folder;
    this.room.join(this, folder.shared);
  }

  /** The network delivers what waits for this device; it writes it at once. */
  deliver(): void {
    const folder = this.folder;
    if (folder === undefined) return;
    for (const update of this.inbox.splice(0)) Y.applyUpdate(folder.shared, update, this.room);
    folder.guarded(() => folder.flushRemote());
  }

  scan(): void {
    this.folder?.guarded(() => this.folder?.scan());
  }

  notice(path: string): void {
    this.folder?.notice(path);
    this.folder?.guarded(() => this.folder?.scanNoticed());
  }

  async stop(): Promise<void> {
    this.crashArmed = false;
    this.folder?.close();
    this.leave();
  }

  async kill(): Promise<void> {
    this.crashArmed = false;
    this.folder?.halt();
    this.leave();
  }

  crashAtNextBatch(armed = true): void {
    this.crashArmed = armed && this.folder !== undefined;
  }

  private leave(): void {
    this.room.leave(this);
    this.folder = undefined;
    this.inbox = [];
  }
}
