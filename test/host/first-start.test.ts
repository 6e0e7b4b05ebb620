import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..', '..');
const canUnshare = spawnSync('unshare', ['-n', 'true']).status === 0;

describe.skipIf(!canUnshare && process.env.REQUIRE_NAMESPACE !== '1')(
  canUnshare
    ? 'first start in an empty folder (private network namespace, default ports)'
    : 'first start in an empty folder (skipped: unshare -n is not permitted here; run as root)',
  () => {
    it('starts with no file at all, prints the https/wss URLs, the certificate and a working admin URL, keeps files private and stops on SIGTERM', () => {
      const script = `ip link set lo up; exec "${process.execPath}" --import tsx "${join(import.meta.dirname, 'first-start-fixture.ts')}"`;
      const run = spawnSync('unshare', ['-n', 'sh', '-c', script], {
        cwd: root,
        encoding: 'utf8',
        timeout: 45_000,
      });
      expect(run.status, run.stderr).toBe(0);
      const r = JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '{}') as Record<
        string,
        unknown
      > & {
        stdout: string;
        stderr: string;
        token: string;
        modes: Record<string, string>;
      };
      expect(r.stdout).toMatch(/^auth: {3}https:\/\/127\.0\.0\.1:8445$/m);
      expect(r.stdout).toMatch(/^relay: {2}wss:\/\/127\.0\.0\.1:8443$/m);
      expect(r.stdout).toMatch(/^status: http:\/\/127\.0\.0\.1:8444$/m);
      // What to do next, right below the URLs: sign in each machine, approve it.
      const lines = r.stdout.split('\n');
      const admin = lines.findIndex((l) => l.startsWith('admin:  '));
      expect(lines[admin + 1]).toMatch(
        /^certificate: [0-9A-F]{4} [0-9A-F]{4} [0-9A-F]{4} [0-9A-F]{4} \(sha256 [\w-]{43}\)$/,
      );
      expect(lines.slice(admin + 2, admin + 4)).toEqual([
        'Next, on each machine that should sync: sync-host login --auth https://127.0.0.1:8445',
        '  and approve the code it shows in the admin UI, or with sync-host pair approve <code> on a machine already signed in',
      ]);
      expect(r.adminUrl).toMatch(/^https:\/\/127\.0\.0\.1:8445\/admin\/#token=[0-9a-f]{64}$/);
      expect(r.pageStatus).toBe(200);
      expect(r.pageType).toMatch(/^text\/html/);
      expect(r.health).toBe(200);
      expect(r.connection).toMatchObject({
        authUrl: 'https://127.0.0.1:8445',
        relayUrl: 'wss://127.0.0.1:8443',
        fingerprint: r.fingerprint,
      });
      // The token is in the fragment only: never in a log line.
      expect(r.stderr).not.toContain(r.token);
      expect(Object.keys(r.modes).sort()).toEqual(
        expect.arrayContaining([
          'admin-token',
          'auth.db',
          'chunks/',
          'relay.db',
          'secret',
          'tls-cert.pem',
          'tls-key.pem',
        ]),
      );
      // Private: files 600, folders (chunks/, beside store.db) 700.
      for (const [file, mode] of Object.entries(r.modes))
        expect(`${file} ${mode}`).toBe(`${file} ${file.endsWith('/') ? 700 : 600}`);
      expect(r.dataDirMode).toBe('700');
      expect(r.code).toBe(0);
      expect(r.stopMs).toBeLessThan(5_000);
    }, 60_000);
  },
);
