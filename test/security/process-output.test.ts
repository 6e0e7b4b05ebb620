import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { signDeviceToken } from '../../server/tokens.ts';
import { writeConf } from '../helpers/configs.ts';
import { type HostProcess, startHostProcess } from '../helpers/host-process.ts';
import { RelayClient } from '../helpers/relay-client.ts';

/**
 * The whole output of a real host process at debug level, after every flow that handles a
 * secret: no token, JWT, secret or admin token may appear on stderr (the log), and stdout holds
 * only the start-up URLs and the dev-mode link lines the contract asks for.
 */
describe('secrets in the output of a host process', () => {
  let host: HostProcess | undefined;
  const dir = mkdtempSync(join(tmpdir(), 'synchost-output-'));
  afterAll(async () => {
    await host?.stop('SIGKILL').catch(() => null);
    rmSync(dir, { recursive: true, force: true });
  });

  it('never logs a token, JWT, secret or admin token, whatever succeeds or fails', async () => {
    writeConf(dir, 'auth.conf', {
      PORT: 0,
      BIND: '127.0.0.1',
      MDNS: 'off',
      DEFAULT_TIER: 'pro',
      TLS: 'off',
    });
    writeConf(dir, 'relay.conf', { 'ws.port': 0, 'status.port': 0 });
    host = await startHostProcess(['--headless', '--log-level', 'debug'], dir);
    const auth = await host.url('auth');
    const relayUrl = await host.url('relay');
    const issued: string[] = [];
    const json = async (res: Response) => (await res.json()) as Record<string, unknown>;
    const linkFor = async (email: string) => {
      const line = await host!.line(`[dev] Magic link token for ${email}: `);
      return line.slice(line.lastIndexOf(' ') + 1);
    };

    await fetch(`${auth}/auth/login?email=one@example.com`);
    const link1 = await linkFor('one@example.com');
    const v1 = await json(
      await fetch(`${auth}/auth/verify?token=${link1}&deviceName=a&platform=linux`),
    );
    const deviceToken = String(v1.deviceToken);
    await fetch(`${auth}/auth/magic-link`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'two@example.com' }),
    });
    const link2 = await linkFor('two@example.com');
    const jwt = String((await json(await fetch(`${auth}/auth/verify?token=${link2}`))).jwt);
    const d2 = await json(
      await fetch(`${auth}/auth/devices`, {
        method: 'POST',
        headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json' },
        body: JSON.stringify({ deviceName: 'b', platform: 'darwin' }),
      }),
    );
    issued.push(link1, link2, deviceToken, jwt, String(d2.deviceToken));
    const bearer = { authorization: `Bearer ${deviceToken}` };
    const project = (
      await json(
        await fetch(`${auth}/auth/project`, {
          method: 'POST',
          headers: { ...bearer, 'content-type': 'application/json' },
          body: JSON.stringify({ projectKey: 'k', name: 'n' }),
        }),
      )
    ).project as { roomId: string };
    await fetch(`${auth}/auth/devices`, { headers: bearer });
    await fetch(`${auth}/auth/verify?token=${link1}&deviceName=a&platform=linux`); // used
    const forged = signDeviceToken(
      { userId: 1, deviceId: 1, issuedAt: 1 },
      'guessed-secret',
      'hmac-sha256',
    );
    issued.push(forged);
    await fetch(`${auth}/auth/devices`, { headers: { authorization: `Bearer ${forged}` } });
    await fetch(`${auth}/admin/api/users`, {
      headers: { authorization: 'Bearer wrong-admin-token-0123456789' },
    });
    issued.push('wrong-admin-token-0123456789');
    const adminToken = readFileSync(join(dir, 'data', 'admin-token'), 'utf8').trim();
    const secret = readFileSync(join(dir, 'data', 'secret'), 'utf8').trim();
    await fetch(`${auth}/admin/api/users`, { headers: { authorization: `Bearer ${adminToken}` } });

    const member = new RelayClient(relayUrl);
    expect(
      await member.join(project.roomId, String((v1.device as { id: number }).id), deviceToken),
    ).toMatchObject({ type: 'joined' });
    member.send({ to: 'broadcast', payload: { secretish: 'x' } });
    const intruder = new RelayClient(relayUrl);
    await intruder.join(project.roomId, '1', forged);
    await intruder.closed;
    member.terminate();

    expect(await host.stop('SIGTERM')).toBe(0);
    const stderr = host.stderr.join('\n');
    expect(stderr).toContain('"level":"debug"');
    for (const value of [...issued, adminToken, secret]) {
      expect(stderr, 'stderr holds a secret').not.toContain(value);
    }
    for (const line of host.stdout.filter((l) => l !== '')) {
      expect(line).toMatch(
        /^(auth|relay|status|admin):\s+\S+$|^Next, on each machine that should sync: sync-host login --auth http:\/\/\S+$|^ {2}and approve the code it shows in the admin UI, or with sync-host pair approve <code> on a machine already signed in$|^\[dev\] (Magic link token for \S+: [0-9a-f]{64}|Sign-in link for \S+: http:\/\/\S+\/auth\/verify\?token=[0-9a-f]{64})$/,
      );
    }
    const stdout = host.stdout.join('\n');
    for (const value of [deviceToken, jwt, secret, forged]) expect(stdout).not.toContain(value);
  }, 60_000);
});
