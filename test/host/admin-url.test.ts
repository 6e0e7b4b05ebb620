import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeConf } from '../helpers/configs.ts';
import { type HostProcess, startHostProcess } from '../helpers/host-process.ts';
import { eventually } from '../helpers/wait.ts';

const dir = mkdtempSync(join(tmpdir(), 'synchost-adminurl-'));
let host: HostProcess | undefined;
afterAll(async () => {
  await host?.stop('SIGKILL').catch(() => null);
  rmSync(dir, { recursive: true, force: true });
});

describe('the admin URL at start', () => {
  it('carries the token on the first start only; later starts print the URL without it and the file that keeps it', async () => {
    writeConf(dir, 'auth.conf', { PORT: 0, BIND: '127.0.0.1', MDNS: 'off', TLS: 'off' });
    writeConf(dir, 'relay.conf', { 'ws.port': 0, 'status.port': 0 });
    const env = { LOG_LEVEL: 'info' };
    host = await startHostProcess(['--headless'], dir, { env });
    const first = await host.url('admin');
    const file = join(dir, 'data', 'admin-token');
    const token = readFileSync(file, 'utf8').trim();
    expect(token).toMatch(/^[0-9a-f]{64}$/);
    expect(first).toMatch(new RegExp(`/admin/#token=${token}$`));
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(host.stderr.join('\n')).not.toContain(token);
    expect(await host.stop('SIGTERM')).toBe(0);

    host = await startHostProcess(['--headless'], dir, { env });
    const later = await host.url('admin');
    expect(later).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/admin\/$/);
    // The line after `admin:` may come in a later chunk of the output.
    const started = host;
    await eventually(
      () => started.stdout.join('\n').includes('(the admin token is in'),
      'the note',
    );
    const lines = host.stdout.join('\n').split('\n');
    expect(lines[lines.findIndex((l) => l.startsWith('admin:')) + 1]).toBe(
      `        (the admin token is in ${file}; the UI asks for it)`,
    );
    expect([...host.stdout, ...host.stderr].join('\n')).not.toContain(token);
    // the token kept in the file still opens the admin API
    const api = await fetch(`${later.replace(/\/admin\/$/, '')}/admin/api/connection`, {
      headers: { Authorization: `Bearer ${token}` },
    });
    expect(api.status).toBe(200);
  }, 60_000);
});
