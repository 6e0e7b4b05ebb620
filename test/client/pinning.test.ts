import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SettingsError, SyncError } from '../../client/errors.ts';
import { FingerprintMismatchError, pinTo } from '../../client/pinning.ts';
import { SyncClient } from '../../client/sync-client.ts';
import { startTestHost, type TestHost } from '../helpers/host.ts';

let th: TestHost;
let fingerprint: string;

beforeAll(async () => {
  th = await startTestHost({ auth: ['TLS=self-signed', 'DEFAULT_TIER=pro'] });
  fingerprint = th.host.fingerprint ?? '';
});

afterAll(async () => {
  await th?.close();
});

describe('the client library pinned by syncFingerprint', { timeout: 60_000 }, () => {
  it('opens a project over HTTPS and joins its room over WSS with the pinned certificate', async () => {
    const device = await th.signIn('lib@example.org');
    const client = new SyncClient(
      {
        syncEnabled: true,
        syncAuthUrl: th.base,
        syncRelayUrl: th.relayUrl,
        syncDeviceToken: device.deviceToken,
        syncFingerprint: fingerprint,
      },
      { pin: pinTo },
    );
    expect(await client.auth.hostInfo()).toMatchObject({ authUrl: th.base });
    const { connection } = await client.openProject('/home/lib/notes', 'notes');
    expect(connection.state).toBe('joined');
    await client.closeConnections();
  });

  it('refuses a host whose certificate has another fingerprint, naming both', async () => {
    const other = 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
    const client = new SyncClient(
      { syncEnabled: true, syncAuthUrl: th.base, syncFingerprint: other },
      { pin: pinTo },
    );
    const failure = await client.auth.hostInfo().catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(FingerprintMismatchError);
    expect((failure as Error).message).toContain(other);
    expect((failure as Error).message).toContain(fingerprint);
  });

  it('takes the fingerprint in hex too, refuses a malformed one, and needs the pinning in Node', () => {
    const hex = Buffer.from(fingerprint, 'base64url').toString('hex');
    const client = new SyncClient({ syncEnabled: true, syncFingerprint: hex.toUpperCase() });
    expect(client.settings.syncFingerprint).toBe(fingerprint);
    expect(() => new SyncClient({ syncFingerprint: 'abcd' })).toThrow(SettingsError);
    const error = (() => {
      try {
        return client.auth;
      } catch (err: unknown) {
        return err;
      }
    })();
    expect(error).toBeInstanceOf(SyncError);
    expect((error as SyncError).code).toBe('invalid_options');
  });
});
