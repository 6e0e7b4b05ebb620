import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAuthClient } from '../../client/auth-client.ts';
import {
  AuthServiceError,
  SyncError,
  UnreachableError,
  WrongServiceError,
} from '../../client/errors.ts';
import { startTestHost, type TestHost } from '../helpers/host.ts';
import { freePort } from '../helpers/ports.ts';

let host: TestHost;

beforeAll(async () => {
  host = await startTestHost();
});

afterAll(async () => {
  await host?.close();
});

const device = { deviceName: 'laptop', platform: 'linux' };

/** The error a call rejects with (the test fails when it resolves). */
async function failure(call: Promise<unknown>): Promise<unknown> {
  try {
    await call;
  } catch (err: unknown) {
    return err;
  }
  throw new Error('the call succeeded');
}

describe('the auth client pointed somewhere else', () => {
  it("recognises the relay's WebSocket port by its 426 answer, and names the default auth URL", async () => {
    const relay = host.relayUrl.replace(/^ws:/, 'http:');
    const auth = createAuthClient({ authUrl: relay });
    for (const call of [() => auth.startPairing(device), () => auth.hostInfo()]) {
      const err = await failure(call());
      expect(err).toBeInstanceOf(WrongServiceError);
      expect(err).toMatchObject({
        code: 'wrong_service',
        service: 'relay',
        givenUrl: relay,
        authUrl: 'http://127.0.0.1:8445',
      });
    }
  });

  it("recognises the relay's status port by its /health answer (405 to a POST, 404 elsewhere)", async () => {
    const status = host.host.urls.status ?? '';
    const auth = createAuthClient({ authUrl: status });
    for (const call of [
      () => auth.startPairing(device),
      () => auth.hostInfo(),
      () => auth.verifyForJwt('x'),
    ]) {
      const err = await failure(call());
      expect(err).toBeInstanceOf(WrongServiceError);
      expect(err).toMatchObject({ service: 'relay_status', authUrl: 'http://127.0.0.1:8445' });
    }
  });

  it("keeps the auth service's own refusals as they are", async () => {
    const { deviceToken } = await host.signIn('kai@example.org');
    const auth = createAuthClient({ authUrl: host.base, deviceToken });
    const err = await failure(auth.deleteDevice(999_999));
    expect(err).toBeInstanceOf(AuthServiceError);
    expect(err).toMatchObject({ code: 'not_found', status: 404 });
  });

  it('tells nothing listening (refused) from a name that does not resolve', async () => {
    const idle = `http://127.0.0.1:${await freePort()}`;
    const refused = await failure(createAuthClient({ authUrl: idle }).hostInfo());
    expect(refused).toBeInstanceOf(UnreachableError);
    expect(refused).toMatchObject({ code: 'unreachable', reason: 'refused' });
    const unknown = await failure(
      createAuthClient({ authUrl: 'http://no-such-host.invalid:8445' }).hostInfo(),
    );
    expect(unknown).toMatchObject({ code: 'unreachable', reason: 'not_found' });
    expect(unknown).toBeInstanceOf(SyncError);
  });
});

describe('the auth client and a host that never answers', () => {
  it('gives up after requestTimeoutMs with the reason timeout, instead of waiting for ever', async () => {
    const { createServer } = await import('node:net');
    const held: import('node:net').Socket[] = [];
    const silent = createServer((socket) => held.push(socket)); // accepts, never answers
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as import('node:net').AddressInfo;
    try {
      const auth = createAuthClient({ authUrl: `http://127.0.0.1:${port}`, requestTimeoutMs: 300 });
      const err = await failure(auth.hostInfo());
      expect(err).toBeInstanceOf(UnreachableError);
      expect((err as UnreachableError).reason).toBe('timeout');
      expect((err as UnreachableError).message).toContain('no answer (timed out)');
      expect(held.length).toBeGreaterThan(0);
    } finally {
      for (const socket of held) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});
