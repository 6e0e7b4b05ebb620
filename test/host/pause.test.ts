import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config/load.ts';
import { startHost } from '../../server/host.ts';
import { createLogger } from '../../server/log.ts';
import { registerProject, startTestHost, type TestHost } from '../helpers/host.ts';
import { RelayClient } from '../helpers/relay-client.ts';

describe('host: relay pause and configuration of its files', () => {
  let t: TestHost | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  it('refuses, after resume, a device that was deleted while the relay was paused', async () => {
    t = await startTestHost({ auth: ['DEFAULT_TIER=pro'] });
    const me = await t.signIn('pause@example.com', 'one');
    const gone = await t.signIn('pause@example.com', 'two');
    const project = await registerProject(t.base, me.deviceToken, 'paused');
    await t.host.pauseRelay();
    const deleted = await fetch(`${t.base}/auth/device/${gone.deviceId}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${me.deviceToken}` },
    });
    expect(deleted.status).toBe(204);
    await t.host.resumeRelay();

    const stranger = new RelayClient(t.relayUrl);
    const refused = await stranger.join(project.roomId, String(gone.deviceId), gone.deviceToken);
    expect(refused).toMatchObject({ type: 'error', code: 'auth_failed' });
    expect((await stranger.closed).code).toBe(4001);

    const friend = new RelayClient(t.relayUrl);
    expect(await friend.join(project.roomId, String(me.deviceId), me.deviceToken)).toMatchObject({
      type: 'joined',
    });
    friend.terminate();
  });

  it('names relay.conf sqlite.path and auth.conf DB_PATH when their files cannot be opened', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'synchost-paths-'));
    writeFileSync(join(dir, 'not-a-dir'), 'x');
    const logger = createLogger('silent');
    const start = async (auth: string, relay: string) => {
      writeFileSync(join(dir, 'auth.conf'), `PORT=0\nBIND=127.0.0.1\nMDNS=off\n${auth}`);
      writeFileSync(join(dir, 'relay.conf'), `ws.port=0\nstatus.port=0\n${relay}`);
      const host = await startHost({
        mode: 'headless',
        config: loadConfig(dir, {}),
        logger,
        print: () => {},
      });
      await host.close();
    };
    await expect(start('', 'sqlite.path=not-a-dir/relay.db\n')).rejects.toThrow(
      /^relay\.conf: sqlite\.path: cannot open .*not-a-dir\/relay\.db \(E[A-Z]+\)$/,
    );
    await expect(start('DB_PATH=not-a-dir/auth.db\n', '')).rejects.toThrow(
      /^auth\.conf: DB_PATH: cannot open .*not-a-dir\/auth\.db \(E[A-Z]+\)$/,
    );
  });
});
