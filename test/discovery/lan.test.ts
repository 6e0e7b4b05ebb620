import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { shortFingerprint } from '../../protocol/fingerprint.ts';
import { toDiscoveredHost } from '../../protocol/mdns-record.ts';

const root = join(import.meta.dirname, '..', '..');
/**
 * Multicast only ever goes over the loopback of a private network namespace: the real network
 * never sees a test packet. Needs root (or user namespaces) and iproute2.
 */
const namespaceScript = [
  'ip link set lo up',
  'ip link set lo multicast on',
  'ip route add 224.0.0.0/4 dev lo',
  `exec "${process.execPath}" --import tsx "${join(import.meta.dirname, 'namespace-fixture.ts')}"`,
].join('; ');
const canUnshare = spawnSync('unshare', ['-n', 'true']).status === 0;
const requireNamespace = process.env.REQUIRE_NAMESPACE === '1';

describe('mDNS TXT records', () => {
  it('accepts a sync-host record and names the problem of a malformed one', () => {
    const txt = {
      auth: 'http://192.168.1.5:8445',
      relay: 'ws://192.168.1.5:8443',
      version: '0.1.0',
    };
    expect(toDiscoveredHost({ name: 'nas', txt, addresses: ['192.168.1.5'] })).toEqual({
      name: 'nas',
      authUrl: txt.auth,
      relayUrl: txt.relay,
      version: '0.1.0',
      addresses: ['192.168.1.5'],
    });
    expect(
      toDiscoveredHost({ name: 'x', txt: { ...txt, relay: 'http://nope' }, addresses: [] }),
    ).toBe('TXT relay must be a ws(s) URL');
    expect(toDiscoveredHost({ name: 'x', txt: { auth: txt.auth }, addresses: [] })).toMatch(
      /^TXT relay /,
    );
    expect(toDiscoveredHost({ name: 'x', txt: { ...txt, version: 'latest' }, addresses: [] })).toBe(
      'TXT version must be a semver version',
    );
  });

  it("reads a TLS host's certificate fingerprint (fp=) and refuses a malformed one", () => {
    const fp = 'KC2clrNXhjoRtm6xigvp7drS8kFwUjPOx8cetJ4cWAk';
    const txt = {
      auth: 'https://192.168.1.5:8445',
      relay: 'wss://192.168.1.5:8443',
      version: '0.1.0',
      fp,
    };
    expect(toDiscoveredHost({ name: 'nas', txt, addresses: [] })).toMatchObject({
      authUrl: txt.auth,
      fingerprint: fp,
    });
    expect(toDiscoveredHost({ name: 'x', txt: { ...txt, fp: 'abc' }, addresses: [] })).toBe(
      'TXT fp must be a base64url SHA-256 fingerprint',
    );
  });
});

describe.skipIf(!canUnshare && !requireNamespace)(
  canUnshare
    ? 'LAN discovery in a private network namespace'
    : 'LAN discovery (skipped: unshare -n is not permitted here; run as root)',
  () => {
    it('advertises _sync-host._tcp, lists it with sync-host discover, and withdraws it on close', () => {
      const run = spawnSync('unshare', ['-n', 'sh', '-c', namespaceScript], {
        cwd: root,
        encoding: 'utf8',
        timeout: 30_000,
      });
      expect(run.status, run.stderr).toBe(0);
      const result = JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '{}') as {
        authUrl: string;
        relayUrl: string;
        fingerprint: string;
        browsedFingerprint: string | undefined;
        discover: { code: number; stdout: string; stderr: string };
        seenUp: boolean;
        seenDown: boolean;
      };
      expect(result.discover.code).toBe(0);
      expect(result.discover.stdout).toContain(`auth:    ${result.authUrl}`);
      expect(result.discover.stdout).toContain(`relay:   ${result.relayUrl}`);
      // The next step, with the URL found.
      expect(result.discover.stdout).toContain(
        `sign in: sync-host login --auth ${result.authUrl}\n`,
      );
      expect(result.discover.stdout).toMatch(/^sync-host on \S+\n/);
      expect(result.discover.stdout).toMatch(/version: \d+\.\d+\.\d+/);
      expect(result.seenUp).toBe(true);
      expect(result.seenDown).toBe(true);
      // The host speaks TLS by default: its certificate's fingerprint is in the TXT record (fp=).
      expect(result.authUrl).toMatch(/^https:\/\//);
      expect(result.fingerprint).toMatch(/^[\w-]{43}$/);
      expect(result.browsedFingerprint).toBe(result.fingerprint);
      expect(result.discover.stdout).toContain(
        `certificate: ${shortFingerprint(result.fingerprint)} (sha256 ${result.fingerprint})`,
      );
    }, 40_000);
  },
);
