import { rmSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { createAuthClient } from '../../client/auth-client.ts';
import { hostDir, type RunningHost, startHostProgram } from '../helpers/host-process.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { signIn } from './host.ts';

/**
 * Relay bug (server/relay, not client code): a device whose socket is closing (the relay has
 * its close frame, the TCP connection is not closed yet) is still a room member until the
 * socket's 'close' event; messages for it are skipped by `sendData` (socket not OPEN) and are
 * neither delivered nor buffered, although the device comes back within the window.
 */
let host: RunningHost | undefined;
let dir: string | undefined;
const clients: RelayClient[] = [];

afterAll(async () => {
  for (const client of clients) client.terminate();
  await host?.process.stop('SIGKILL').catch(() => null);
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

describe('relay: a device whose connection is closing', () => {
  it('gets the messages sent meanwhile buffered, not dropped', async () => {
    dir = hostDir();
    host = await startHostProgram(dir);
    const a = await signIn(host, 'gina@example.org', 'a');
    const b = await signIn(host, 'gina@example.org', 'b');
    const { project } = await createAuthClient({
      authUrl: host.authUrl,
      deviceToken: a.deviceToken,
    }).registerProject('gina', 'gina');
    const client = () => {
      const c = new RelayClient(host!.relayUrl);
      clients.push(c);
      return c;
    };
    const sender = client();
    expect(await sender.join(project.roomId, String(a.device.id), a.deviceToken)).toMatchObject({
      type: 'joined',
    });
    const closing = client();
    await closing.join(project.roomId, String(b.device.id), b.deviceToken);
    await sender.next('presence');

    // B closes without leave and stops reading, so its TCP connection lingers for a while.
    (closing.socket as unknown as { _socket: { pause(): void } })._socket.pause();
    closing.socket.close(1000);
    await sender.sync(); // B's close frame was already in the relay's socket buffer
    sender.send({ to: 'broadcast', payload: { n: 1 } });
    await sender.sync();
    closing.terminate();
    await sender.next('presence', 40_000);

    const back = client();
    const joined = await back.join(project.roomId, String(b.device.id), b.deviceToken);
    expect(joined).toMatchObject({ type: 'joined', buffered: 1 });
  }, 60_000);
});
