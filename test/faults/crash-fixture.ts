import { rmSync } from 'node:fs';
import { afterAll } from 'vitest';
import { signDeviceToken } from '../../server/tokens.ts';
import type { HostProcess } from '../helpers/host-process.ts';
import { RelayClient } from '../helpers/relay-client.ts';

/**
 * What the relay-killing tests share: device tokens under their secret, and the folders,
 * processes and clients they make, all released after the file (processes killed with -9).
 */
export function useCrashFixture(secret: string) {
  const dirs: string[] = [];
  const processes: HostProcess[] = [];
  const clients: RelayClient[] = [];
  afterAll(async () => {
    for (const c of clients) c.terminate();
    await Promise.all(processes.map((p) => p.stop('SIGKILL').catch(() => null)));
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  return {
    dirs,
    processes,
    token: (userId: number, deviceId: number) =>
      signDeviceToken(
        { userId, deviceId, issuedAt: Math.floor(Date.now() / 1000) },
        secret,
        'hmac-sha256',
      ),
    connect: (url: string) => {
      const c = new RelayClient(url);
      clients.push(c);
      return c;
    },
  };
}
