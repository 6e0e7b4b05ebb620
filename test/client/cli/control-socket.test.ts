import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { probeControl } from '../../../client/cli/control-client.ts';
import {
  AlreadyRunningError,
  type ControlHandlers,
  type ControlServer,
  serveControl,
} from '../../../client/cli/control-socket.ts';

const root = mkdtempSync(join(tmpdir(), 'control-socket-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function handlers(pid: number): ControlHandlers {
  return {
    send: async () => undefined,
    subscribe: () => () => undefined,
    status: () => ({
      state: 'joined',
      projectKey: 'p',
      folder: '/f',
      device: '1',
      devices: [],
      pid,
    }),
  };
}

/** A socket file at `path` that nobody answers on: what a sync killed with SIGKILL leaves. */
function staleSocket(path: string): void {
  const listen = `require('node:net').createServer().listen(${JSON.stringify(path)}, () => process.kill(process.pid, 'SIGKILL'))`;
  spawnSync(process.execPath, ['-e', listen]);
  expect(existsSync(path)).toBe(true);
}

describe.skipIf(process.platform === 'win32')('the control socket of a sync', () => {
  it('goes to exactly one of two syncs started at once over a stale socket', async () => {
    for (let round = 0; round < 5; round += 1) {
      const folder = join(root, `run-${round}`);
      mkdirSync(folder, { mode: 0o700 });
      const path = join(folder, 'sync.sock');
      staleSocket(path);
      const started = await Promise.allSettled([
        serveControl(path, handlers(1)),
        serveControl(path, handlers(2)),
      ]);
      const served = started.filter((s) => s.status === 'fulfilled');
      const refused = started.filter((s) => s.status === 'rejected');
      expect(served).toHaveLength(1);
      expect(refused).toHaveLength(1);
      expect((refused[0] as PromiseRejectedResult).reason).toBeInstanceOf(AlreadyRunningError);
      // The one that started is the one that answers there.
      const server = (served[0] as PromiseFulfilledResult<ControlServer>).value;
      const probe = await probeControl(path);
      expect(probe.kind).toBe('running');
      const pid = (started[0].status === 'fulfilled' ? 1 : 2) as number;
      expect(probe.kind === 'running' && probe.status?.pid).toBe(pid);
      await server.close();
      expect(existsSync(`${path}.lock`)).toBe(false);
    }
  });
});
