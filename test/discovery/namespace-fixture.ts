// Runs inside a private network namespace (see lan.test.ts): starts a host advertising over
// mDNS (with its default TLS), runs `sync-host discover`, then watches the host withdraw on close.
// Prints one JSON line.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { browse } from '../../client/discovery.ts';
import { loadConfig } from '../../server/config/load.ts';
import { startHost } from '../../server/host.ts';
import { createLogger } from '../../server/log.ts';

const root = join(import.meta.dirname, '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'sync-host-mdns-'));
writeFileSync(join(dir, 'auth.conf'), 'PORT=0\nMDNS=on\n');
writeFileSync(join(dir, 'relay.conf'), 'ws.port=0\nstatus.port=0\n');
const host = await startHost({
  mode: 'headless',
  config: loadConfig(dir, {}),
  logger: createLogger('silent'),
  print: () => {},
});

const discover = await new Promise<{ code: number | null; stdout: string; stderr: string }>(
  (resolve) => {
    const child = spawn(
      process.execPath,
      [join(root, 'bin', 'sync-host'), 'discover', '--timeout', '2'],
      { cwd: dir },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  },
);

let seenUp = false;
let seenDown = false;
let browsedFingerprint: string | undefined;
const browsing = browse({
  onUp: (found) => {
    seenUp = true;
    browsedFingerprint = found.fingerprint;
  },
  onDown: () => {
    seenDown = true;
  },
});
const until = Date.now() + 4_000;
while (!seenUp && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
await host.close();
while (!seenDown && Date.now() < until + 3_000) await new Promise((r) => setTimeout(r, 50));
await browsing.stop();
rmSync(dir, { recursive: true, force: true });

process.stdout.write(
  `${JSON.stringify({
    authUrl: host.urls.auth,
    relayUrl: host.urls.relay,
    fingerprint: host.fingerprint,
    browsedFingerprint,
    discover,
    seenUp,
    seenDown,
  })}\n`,
);
