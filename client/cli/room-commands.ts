import { SyncError } from '../errors.ts';
import { type Context, expectArgs, UsageError } from './context.ts';
import { printable, printableJson } from './printable.ts';
import { openRoomOf, stopSignal } from './project-room.ts';

/** Rejects with `what` after `ms`; the timer is cleared by `cancel`. */
function deadline(ms: number, what: string): { promise: Promise<never>; cancel: () => void } {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const promise = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new SyncError('timeout', what)), ms);
  });
  return { promise, cancel: () => clearTimeout(timer) };
}

/** `send <projectKey> <to> <json>`: joins, sends one message, waits until the relay has it. */
export async function send(ctx: Context): Promise<number> {
  expectArgs(ctx, 3, '<projectKey> <to> <json>');
  const [projectKey, to, json] = ctx.args as [string, string, string];
  let payload: unknown;
  try {
    payload = JSON.parse(json);
  } catch (err: unknown) {
    if (!(err instanceof SyntaxError)) throw err;
    throw new UsageError('<json> is not valid JSON');
  }
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
    throw new UsageError('<json> must be a JSON object');
  }
  const seconds = ctx.flags.timeout === undefined ? 10 : Number(ctx.flags.timeout);
  if (!Number.isFinite(seconds) || seconds <= 0) {
    throw new UsageError('--timeout must be a positive number of seconds');
  }
  const { connection } = await openRoomOf(ctx, projectKey);
  const relayErrors: SyncError[] = [];
  connection.on('error', (err) => relayErrors.push(err));
  const limit = deadline(
    seconds * 1000,
    `the message was not delivered to the relay within ${seconds} s`,
  );
  try {
    await Promise.race([connection.connect(), limit.promise]);
    connection.send(to, payload as Record<string, unknown>);
    await Promise.race([connection.flush(), limit.promise]);
    const failed = relayErrors[0];
    if (failed !== undefined) throw failed;
    return 0;
  } finally {
    limit.cancel();
    if (connection.state !== 'closed') await connection.close();
  }
}

/** `listen <projectKey>`: prints each message for this device as one JSON line until stopped. */
export async function listen(ctx: Context): Promise<number> {
  expectArgs(ctx, 1, '<projectKey>');
  const { connection } = await openRoomOf(ctx, ctx.args[0]!);
  const { stdout, stderr } = ctx.io;
  connection.on('joined', (frame) => {
    stderr.write(
      `joined room ${printable(frame.room)} as device ${printable(frame.device)} (${frame.role}); ${frame.buffered} buffered message(s) follow${frame.gap ? '; some messages were lost while away (gap)' : ''}\n`,
    );
  });
  connection.on('message', (message) => {
    stdout.write(`${printableJson(message)}\n`);
  });
  connection.on('presence', (frame) =>
    stderr.write(`device ${printable(frame.device)} ${frame.state}\n`),
  );
  connection.on('host', (frame) =>
    stderr.write(`device ${printable(frame.device)} is now the host\n`),
  );
  connection.on('state', (state) => {
    if (state === 'reconnecting') stderr.write('connection lost; reconnecting\n');
  });
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
