import { describe, expect, it } from 'vitest';
import { SettingsError, SyncError } from '../../client/errors.ts';
import type { WebSocketLike } from '../../client/relay-connection.ts';
import { defaultSettings, deviceTokenIds, parseSettings } from '../../client/settings.ts';
import { SyncClient } from '../../client/sync-client.ts';

const token = '3:7:1760000000.0123456789abcdef';

function errorOf(input: unknown): SettingsError {
  try {
    parseSettings(input);
  } catch (err: unknown) {
    if (err instanceof SettingsError) return err;
    throw err;
  }
  throw new Error('accepted');
}

describe('client settings', () => {
  it('has exactly the four settings, sync off by default', () => {
    expect(defaultSettings).toEqual({
      syncEnabled: false,
      syncRelayUrl: 'ws://localhost:8443',
      syncAuthUrl: 'http://localhost:8445',
      syncDeviceToken: '',
    });
    expect(parseSettings()).toEqual(defaultSettings);
  });

  it('accepts ws and wss relay URLs and http and https auth URLs', () => {
    for (const [relay, auth] of [
      ['wss://sync.example.org/relay', 'https://sync.example.org'],
      ['ws://192.168.1.20:8443', 'http://nas.local:8445/'],
    ]) {
      expect(parseSettings({ syncRelayUrl: relay, syncAuthUrl: auth })).toMatchObject({
        syncRelayUrl: relay,
        syncAuthUrl: auth,
      });
    }
    expect(parseSettings({ syncDeviceToken: token, syncEnabled: true }).syncDeviceToken).toBe(
      token,
    );
  });

  it('rejects other schemes, wrong types and unknown keys, naming each setting', () => {
    expect(errorOf({ syncRelayUrl: 'https://sync.example.org' }).message).toBe(
      'syncRelayUrl must be a ws:// or wss:// URL',
    );
    expect(errorOf({ syncAuthUrl: 'wss://sync.example.org' }).message).toBe(
      'syncAuthUrl must be an http:// or https:// URL',
    );
    expect(errorOf({ syncAuthUrl: 'ftp://x', syncEnabled: 'yes' }).message).toBe(
      'syncEnabled must be true or false; syncAuthUrl must be an http:// or https:// URL',
    );
    expect(errorOf({ syncDeviceToken: 'secret' }).message).toMatch(
      /^syncDeviceToken must be empty or a device token/,
    );
    expect(errorOf({ syncRelay: 'ws://x' }).message).toMatch(/^unknown setting "syncRelay"/);
    expect(errorOf({ syncRelay: 'ws://x' }).code).toBe('invalid_settings');
    expect(errorOf({ syncDeviceToken: 'secret' }).message).not.toContain('secret');
  });

  it('reads the user and device ids of a device token', () => {
    expect(deviceTokenIds(token)).toEqual({ userId: 3, deviceId: 7 });
    expect(deviceTokenIds('')).toBeUndefined();
  });
});

describe('SyncClient while sync is disabled', () => {
  it('opens no connection and makes no request', async () => {
    const attempts: string[] = [];
    class RecordingWebSocket {
      constructor(url: string) {
        attempts.push(url);
      }
    }
    const client = new SyncClient(
      { syncDeviceToken: token },
      {
        WebSocket: RecordingWebSocket as unknown as new (url: string) => WebSocketLike,
        fetch: async (input) => {
          attempts.push(String(input));
          return new Response('{}');
        },
      },
    );
    expect(() => client.joinRoom('3.abc.def')).toThrow(SyncError);
    expect(() => client.auth).toThrow(/sync is disabled/);
    await expect(client.openProject('/ws', 'ws')).rejects.toMatchObject({ code: 'sync_disabled' });
    expect(attempts).toEqual([]);

    await client.updateSettings({ syncEnabled: true });
    expect(client.joinRoom('3.abc.def').state).toBe('idle');
    expect(attempts).toEqual([]);
  });
});
