import { SyncError } from '../errors.ts';
import type { RelayConnection } from '../relay-connection.ts';
import { type Context, expectArgs, signedIn, UsageError } from './context.ts';
import { listenControl, requestControl } from './control-client.ts';
import { controlSocketPath } from './control-path.ts';
import type { ControlEvent } from './control-protocol.ts';
import type { CliIo } from './io.ts';
import { printable, printableJson } from './printable.ts';
import { localNameOf, openRoomOf, stopSignal } from './project-room.ts';

/** Rejects with `what` after `ms`; the timer is cleared by `cancel`. */
function deadline(ms: number, what: string): { promise: Promise<never>; cancel: () => void } {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const promise = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new SyncError('timeout', what)), ms);
  });
  return { promise, cancel: () => clearTimeout(timer) };
}

/**
 * The control socket of a `sync` of the project running with these credentials, if one runs
 * (the relay keeps one connection per device and room: `send` and `listen` go through it).
 */
async function syncSocketOf(ctx: Context, projectKey: string): Promise<string> {
  const { authUrl } = await signedIn(ctx);
  return controlSocketPath(ctx.store.dir, authUrl, await localNameOf(ctx, projectKey));
}

/** How a payload is written on a shell's command line: an object, in single quotes. */
const jsonExample = `an object in single quotes, as '{"text":"hi"}'`;

/** `send <projectKey> <to> <json>`: joins, sends one message, waits until the relay has it. */
export async function send(ctx: Context): Promise<number> {
  expectArgs(ctx, 3, '<projectKey> <to> <json>');
  const [projectKey, to, json] = ctx.args as [string, string, string];
  let payload: unknown;
  try {
    payload = JSON.parse(json);
  } catch (err: unknown) {
    if (!(err instanceof SyntaxError)) throw err;
    throw new UsageError(`<json> is not valid JSON: ${jsonExample}`);
  }
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
    throw new UsageError(`<json> must be a JSON object: ${jsonExample}`);
  }
  const seconds = ctx.flags.timeout === undefined ? 10 : Number(ctx.flags.timeout);
  if (!Number.isFinite(seconds) || seconds <= 0) {
    throw new UsageError('--timeout must be a positive number of seconds');
  }
  const late = `the message was not delivered to the relay within ${seconds} s`;
  const request = { op: 'send', to, payload: payload as Record<string, unknown> } as const;
  const viaSync = await requestControl(
    await syncSocketOf(ctx, projectKey),
    request,
    seconds * 1000,
    late,
  );
  if (viaSync !== undefined) return 0;

  const { connection } = await openRoomOf(ctx, projectKey);
  const relayErrors: SyncError[] = [];
  connection.on('error', (err) => relayErrors.push(err));
  const limit = deadline(seconds * 1000, late);
  try {
    await Promise.race([connection.connect(), limit.promise]);
    connection.send(to, request.payload);
    await Promise.race([connection.flush(), limit.promise]);
    const failed = relayErrors[0];
    if (failed !== undefined) throw failed;
    return 0;
  } finally {
    limit.cancel();
    if (connection.state !== 'closed') await connection.close();
  }
}

/** Prints one relay event as `listen` does: messages as JSON lines on stdout, others on stderr. */
function printEvent(io: CliIo, event: ControlEvent): void {
  if ('message' in event) {
    io.stdout.write(`${printableJson(event.message)}\n`);
  } else if ('joined' in event) {
    const { room, device, role, buffered, gap } = event.joined;
    io.stderr.write(
      `joined room ${printable(room)} as device ${printable(device)} (${role}); ${buffered} buffered message(s) follow${gap ? '; some messages were lost while away (gap)' : ''}\n`,
    );
  } else if ('presence' in event) {
    io.stderr.write(`device ${printable(event.presence.device)} ${event.presence.state}\n`);
  } else if ('host' in event) {
    io.stderr.write(`device ${printable(event.host.device)} is now the host\n`);
  } else if (event.state === 'reconnecting') {
    io.stderr.write('connection lost; reconnecting\n');
  } else if (event.state === 'waiting') {
    io.stderr.write("the sync's connection ended; it joins again after a pause\n");
  }
}

/** Passes the connection's events to `print` as the control socket would. */
function relayEvents(connection: RelayConnection, print: (event: ControlEvent) => void): void {
  connection.on('joined', (joined) => print({ joined }));
  connection.on('message', (message) => print({ message }));
  connection.on('presence', (presence) => print({ presence }));
  connection.on('host', (host) => print({ host }));
  connection.on('state', (state) => print({ state }));
}

/**
 * `listen <projectKey>`: prints each message for this device as one JSON line until stopped;
 * through the running `sync` of the project when there is one.
 */
export async function listen(ctx: Context): Promise<number> {
  expectArgs(ctx, 1, '<projectKey>');
  const projectKey = ctx.args[0]!;
  const print = (event: ControlEvent) => printEvent(ctx.io, event);
  const viaSync = await listenControl(await syncSocketOf(ctx, projectKey), print);
  if (viaSync !== undefined) {
    ctx.io.stderr.write('listening through the running sync of this project\n');
    const outcome = await Promise.race([stopSignal(), viaSync.ended]);
    viaSync.close();
    if (outcome === 'stopped') return 0;
    throw new SyncError('sync_stopped', 'the sync this listen went through stopped');
  }

  const { connection } = await openRoomOf(ctx, projectKey);
  relayEvents(connection, print);
  const ended = new Promise<SyncError | undefined>((resolve) => {
    connection.on('close', (info) => resolve(info.error));
  });
  connection.connect().catch(() => {
    // The close event reports why.
  });
  const stopped = stopSignal();
  const outcome = await Promise.race([stopped, ended]);
  if (outcome === 'stopped') {
    // No leave: the relay keeps buffering for this device, the next listen prints it first.
    await connection.close({ leave: false });
    return 0;
  }
  if (outcome !== undefined) throw outcome;
  return 0;
}
