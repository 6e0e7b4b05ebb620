import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startTcpProxy, type TcpProxy } from '../../helpers/tcp-proxy.ts';
import { eventually } from '../../helpers/wait.ts';
import { cliDevices } from './cli-devices.ts';

/**
 * How fast `sync` stops: SIGTERM to exit within 2 s, in every one of 20 runs (with a file
 * changed just before the signal and another device in the room), and when the host hangs
 * (a proxy that forwards nothing more), exit code 0.
 */

const { setUp: devices, spawnCli } = cliDevices('sync-stop');
const proxies: TcpProxy[] = [];
afterAll(async () => {
  for (const proxy of proxies) await proxy.close();
});

async function setUp() {
  const set = await devices();
  return {
    ...set,
    runner: (args: string[]) => spawnCli(args, set.config.one),
  };
}

describe('sync stops on SIGTERM', () => {
  it('exits within 2 s of SIGTERM in 20 of 20 runs, with what it read last on the host', async () => {
    const { folder, start } = await setUp();
    const two = start('two');
    await eventually(() => two.out.stdout.includes('in sync\n'), 'two in sync', 30_000);
    const times: number[] = [];
    for (let run = 0; run < 20; run += 1) {
      const one = start('one');
      await eventually(() => one.out.stdout.includes('in sync\n'), `run ${run}: in sync`, 30_000);
      writeFileSync(join(folder.one, `note-${run}.md`), `run ${run}\n`);
      await eventually(
        () => one.out.stdout.includes(`sent note-${run}.md (new)\n`),
        `run ${run}: sent`,
        30_000,
      );
      const signalled = performance.now();
      one.child.kill('SIGTERM');
      expect(await one.exited).toBe(0);
      times.push(Math.round(performance.now() - signalled));
    }
    expect(
      times.filter((ms) => ms > 2_000),
      `stop times (ms): ${times.join(', ')}`,
    ).toEqual([]);
    // What one sent before each stop reached the other device.
    await eventually(
      () => two.out.stdout.includes('received note-19.md\n'),
      'the last note at two',
      30_000,
    );
    two.child.kill('SIGTERM');
    expect(await two.exited).toBe(0);
  }, 300_000);

  it('exits within 2 s of SIGTERM when the host hangs (it neither confirms nor closes)', async () => {
    const { th, folder, runner } = await setUp();
    const relay = new URL(th.relayUrl);
    const proxy = await startTcpProxy(relay.hostname, Number(relay.port));
    proxies.push(proxy);
    const one = runner(['sync', 'files', folder.one, '--relay', `ws://127.0.0.1:${proxy.port}`]);
    await eventually(() => one.out.stdout.includes('in sync\n'), 'in sync', 30_000);
    proxy.freeze();
    writeFileSync(join(folder.one, 'late.md'), 'never confirmed\n');
    await eventually(() => one.out.stdout.includes('sent late.md (new)\n'), 'sent', 30_000);
    const signalled = performance.now();
    one.child.kill('SIGTERM');
    expect(await one.exited).toBe(0);
    expect(performance.now() - signalled).toBeLessThan(2_000);
  }, 60_000);
});
