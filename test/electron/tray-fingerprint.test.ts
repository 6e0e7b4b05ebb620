import { generateKeyPairSync, X509Certificate } from 'node:crypto';
import { connect as connectTls } from 'node:tls';
import { describe, expect, it } from 'vitest';
import { pinnedFetch } from '../../client/pinning.ts';
import { createTrayAdminApi } from '../../electron/admin-client.ts';
import { acceptsCertificate, type OwnHost } from '../../electron/certificate-trust.ts';
import { connectionDetails, trayMenu, trayStateOf } from '../../electron/tray-menu.ts';
import { shortFingerprint } from '../../protocol/fingerprint.ts';
import { makeSelfSigned } from '../../server/tls/certificate.ts';
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

/** A new ECDSA P-256 key, PEM. */
function newKey(): string {
  return generateKeyPairSync('ec', { namedCurve: 'P-256' })
    .privateKey.export({ type: 'pkcs8', format: 'pem' })
    .toString();
}

/** The certificate a TLS port shows, in PEM as Electron hands it to `certificate-error`. */
function shownPem(base: string): Promise<string> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connectTls({ host: hostname, port: Number(port), rejectUnauthorized: false });
    socket.once('error', reject);
    socket.once('secureConnect', () => {
      resolve(new X509Certificate(socket.getPeerCertificate().raw).toString());
      socket.end();
    });
  });
}

describe("the tray window's certificate check (certificate-error)", () => {
  const base = 'https://127.0.0.1:8445';
  const page = `${base}/admin/#pair=BCDF-GHJK`;

  it("accepts the host's own certificate at its own address, renewed on the same key too", async () => {
    const key = newKey();
    const now = Date.parse('2026-11-26T12:00:00Z');
    const first = await makeSelfSigned(key, ['127.0.0.1'], now);
    const renewed = await makeSelfSigned(key, ['127.0.0.1'], now + 300 * 86_400_000);
    const own = { base, fingerprint: first.fingerprint };
    expect(acceptsCertificate({ url: page, certificatePem: first.cert }, own)).toBe(true);
    expect(renewed.cert).not.toBe(first.cert);
    expect(acceptsCertificate({ url: page, certificatePem: renewed.cert }, own)).toBe(true);
  });

  it('refuses another certificate, another address, a plain host and what is not a certificate', async () => {
    const now = Date.now();
    const host = await makeSelfSigned(newKey(), ['127.0.0.1'], now);
    const other = await makeSelfSigned(newKey(), ['127.0.0.1'], now);
    const own: OwnHost = { base, fingerprint: host.fingerprint };
    const asks = (url: string, certificatePem: string, to = own) =>
      acceptsCertificate({ url, certificatePem }, to);
    expect(asks(page, other.cert)).toBe(false);
    expect(asks('https://127.0.0.1:84450/admin/', host.cert)).toBe(false);
    expect(asks('https://192.168.1.5:8445/admin/', host.cert)).toBe(false);
    expect(asks('https://example.org/', host.cert)).toBe(false);
    expect(asks(page, host.cert, { base, fingerprint: undefined })).toBe(false);
    expect(
      asks(page, host.cert, { base: 'http://127.0.0.1:8445', fingerprint: host.fingerprint }),
    ).toBe(false);
    expect(asks(page, 'not a certificate')).toBe(false);
    expect(asks(page, '')).toBe(false);
  });

  it("accepts what a running host's auth port shows, at that port only", async () => {
    const th = await startTestHost({ auth: ['TLS=self-signed'] });
    try {
      const own = { base: th.base, fingerprint: th.host.fingerprint };
      const pem = await shownPem(th.base);
      expect(acceptsCertificate({ url: `${th.base}/admin/`, certificatePem: pem }, own)).toBe(true);
      const elsewhere = th.base.replace(/:(\d+)$/, (_m, port: string) => `:${Number(port) + 1}`);
      expect(acceptsCertificate({ url: `${elsewhere}/admin/`, certificatePem: pem }, own)).toBe(
        false,
      );
    } finally {
      await th.close();
    }
  });
});
