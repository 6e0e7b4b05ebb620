import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { SyncError } from '../errors.ts';
import type { Waiting } from '../folder/status.ts';
import { type Context, printJson, signedIn, UsageError } from './context.ts';
import { probeControl } from './control-client.ts';
import { controlSocketFolders, controlSocketPath } from './control-path.ts';
import type { SyncStatus } from './control-protocol.ts';
import { printable } from './printable.ts';
import { localNameOf } from './project-room.ts';

/**
 * `status [projectKey] [--json]`: what the running syncs of this device say about their
 * folders: connected or not, when last in step, files waiting up and down, conflicts, devices.
 * Without a key, every sync running with these credentials; with one, that project's (exit 1
 * when it does not run).
 */
export async function statusCommand(ctx: Context): Promise<number> {
  if (ctx.args.length > 1) throw new UsageError(`unexpected argument "${ctx.args.at(-1)}"`);
  const projectKey = ctx.args[0];
  if (projectKey !== undefined) {
    const { authUrl } = await signedIn(ctx);
    const local = await localNameOf(ctx, projectKey);
    const probe = await probeControl(controlSocketPath(ctx.store.dir, authUrl, local));
    if (probe.kind !== 'running' || probe.status === undefined) {
      throw new SyncError(
        'not_running',
        `no sync of "${projectKey}" is running for this device (start one: sync-host sync ${projectKey} <dir>)`,
      );
    }
    if (ctx.flags.json) return printJson(ctx, probe.status);
    ctx.io.stdout.write(describe(probe.status));
    return 0;
  }
  const statuses = await runningSyncs(ctx.store.dir);
  if (ctx.flags.json) return printJson(ctx, statuses);
  if (statuses.length === 0) ctx.io.stdout.write('no sync is running for this device\n');
  for (const status of statuses) ctx.io.stdout.write(describe(status));
  return 0;
}

/** The status of every sync that answers on a socket of `configDir`, by project key. */
async function runningSyncs(configDir: string): Promise<SyncStatus[]> {
  const statuses: SyncStatus[] = [];
  for (const folder of controlSocketFolders(configDir)) {
    let names: string[];
    try {
      names = readdirSync(folder).filter((name) => name.endsWith('.sock'));
    } catch {
      continue;
    }
    for (const name of names) {
      const probe = await probeControl(join(folder, name));
      if (probe.kind === 'running' && probe.status !== undefined) statuses.push(probe.status);
    }
  }
  return statuses.sort((a, b) => (a.projectKey < b.projectKey ? -1 : 1));
}

const connectionWords: Record<string, string> = {
  joined: 'connected',
  connecting: 'connecting',
  reconnecting: 'offline, reconnecting',
  waiting: 'offline, joining again soon',
  idle: 'not connected yet',
  stopped: 'stopping',
};

/** A few lines per sync; every name from elsewhere escaped. */
function describe(status: SyncStatus): string {
  const fields = status as SyncStatus & {
    inSync?: boolean;
    lastInSync?: string | null;
    waitingUp?: Waiting;
    waitingDown?: Waiting;
    conflicts?: string[];
    skipped?: number;
    storeFull?: boolean;
    who?: Record<string, { email?: string; deviceName?: string; role?: string }>;
    viewer?: boolean;
    notSent?: string[];
  };
  const others = status.devices
    .filter((device) => device !== status.device)
    .map((device) => {
      const who = fields.who?.[device];
      return who?.email === undefined
        ? device
        : `${device} (${who.email}, ${who.deviceName ?? '?'}, ${who.role ?? '?'})`;
    });
  const lines = [
    `${status.projectKey}: ${status.folder} (pid ${status.pid})`,
    `  ${connectionWords[status.state] ?? status.state} as device ${status.device}; other devices online: ${others.length === 0 ? 'none' : others.map((device) => `device ${device}`).join(', ')}`,
    `  ${fields.inSync ? 'in step with the other devices' : fields.lastInSync ? `last in step ${fields.lastInSync}` : 'not in step with another device yet'}`,
    `  waiting to go up: ${amount(fields.waitingUp)}; to be written here: ${amount(fields.waitingDown)}`,
  ];
  if (fields.storeFull === true) {
    lines.push("  the host's store is full: files wait to go up (tried again every 30 s)");
  }
  if ((fields.skipped ?? 0) > 0) lines.push(`  files here that do not sync: ${fields.skipped}`);
  if (fields.viewer === true) {
    const kept = fields.notSent ?? [];
    lines.push(
      `  a viewer of this project: changes made here are not sent (${kept.length === 0 ? 'none yet' : kept.length})`,
    );
    for (const path of kept) lines.push(`    ${path}`);
  }
  const conflicts = fields.conflicts ?? [];
  lines.push(`  conflict copies: ${conflicts.length === 0 ? 'none' : conflicts.length}`);
  for (const path of conflicts) lines.push(`    ${path}`);
  return `${lines.map(printable).join('\n')}\n`;
}

function amount(waiting: Waiting | undefined): string {
  if (waiting === undefined) return 'unknown';
  const files = `${waiting.files} file${waiting.files === 1 ? '' : 's'}`;
  return waiting.files === 0 ? files : `${files} (${bytesText(waiting.bytes)})`;
}

function bytesText(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}
