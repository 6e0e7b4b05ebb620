import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminUiRouter } from '../../server/admin/ui.ts';
import { captureLogger } from '../helpers/capture.ts';

describe('admin UI files', () => {
  const dir = mkdtempSync(join(tmpdir(), 'admin-ui-'));
  const capture = captureLogger('info');
  let server: Server;
  let base: string;
  beforeAll(async () => {
    writeFileSync(join(dir, 'index.html'), '<!doctype html><title>admin</title>');
    mkdirSync(join(dir, 'app.css')); // unreadable as a file: EISDIR
    const app = express();
    app.use(
      '/admin',
      createAdminUiRouter({ logger: capture.logger, distDir: dir, sourceDir: false }),
    );
    server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/admin`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves a built file', async () => {
    const res = await fetch(`${base}/`);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('<title>admin</title>');
  });

  it('answers 503 "not built" for a missing file, without logging an error', async () => {
    const res = await fetch(`${base}/app.js`);
    expect(res.status).toBe(503);
    expect(await res.text()).toMatch(/not built/);
    expect(capture.lines.some((l) => l.includes('app.js'))).toBe(false);
  });

  it('answers 500 and logs the cause when a file exists but cannot be read', async () => {
    const res = await fetch(`${base}/app.css`);
    expect(res.status).toBe(500);
    expect(await res.text()).not.toMatch(/EISDIR|at .*\.ts:\d+/);
    const line = capture.lines.find((l) => l.includes('the admin UI file could not be read'));
    expect(line).toContain('EISDIR');
    expect(line).toContain('"level":"error"');
  });
});
