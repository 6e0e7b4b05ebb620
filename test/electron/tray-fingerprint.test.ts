import { describe, expect, it } from 'vitest';
import { pinnedFetch } from '../../client/pinning.ts';
import { createTrayAdminApi } from '../../electron/admin-client.ts';
import { connectionDetails, trayMenu, trayStateOf } from '../../electron/tray-menu.ts';
import { shortFingerprint } from '../../protocol/fingerprint.ts';
import { startTestHost } from '../helpers/host.ts';

const fingerprint = 'KC2clrNXhjoRtm6xigvp7drS8kFwUjPOx8cetJ4cWAk';
const host = {
  urls: { auth: 'https://192.168.1.5:8445', relay: 'wss://192.168.1.5:8443' },
  relayPaused: false,
};

describe('the tray of a host with TLS', () => {
  it('shows the certificate short form in the menu and copies the fingerprint with the settings', () => {
    const state = trayStateOf({ ...host, fingerprint }, false);
    const labels = trayMenu(state).map((item) => item.label);
    expect(labels).toContain(`Certificate: ${shortFingerprint(fingerprint)}`);
    expect(connectionDetails(state)).toBe(
      `syncAuthUrl: ${host.urls.auth}\nsyncRelayUrl: ${host.urls.relay}\nfingerprint: ${fingerprint}\n`,
    );
  });

  it('shows no certificate line for a host without TLS', () => {
    const state = trayStateOf(host, false);
    expect(trayMenu(state).some((item) => item.label.startsWith('Certificate'))).toBe(false);
    expect(connectionDetails(state)).not.toContain('fingerprint');
  });

  it("reaches its own host's admin API pinned to the certificate, and nothing else", async () => {
    const th = await startTestHost({ auth: ['TLS=self-signed'] });
    try {
      const fingerprint = th.host.fingerprint ?? '';
      const base = () => th.base;
      const token = () => th.host.adminToken;
      const pinned = createTrayAdminApi(base, token, () => pinnedFetch(fingerprint));
      expect(await pinned.pairings()).toEqual([]);
      const other = pinnedFetch('AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA');
      await expect(createTrayAdminApi(base, token, () => other).pairings()).rejects.toThrow(
        /cannot be reached .*shows certificate/,
      );
    } finally {
      await th.close();
    }
  });
});
