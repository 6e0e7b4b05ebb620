import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AuthHarness, adminToken, startAuth } from '../helpers/auth-harness.ts';
import { chromiumFlags, chromiumPath, hasBrowser } from '../helpers/chromium.ts';
import { dbTargets } from '../helpers/databases.ts';

const [sqlite] = await dbTargets();

describe.skipIf(!hasBrowser)(
  'a web page on another origin calling the auth service in Chromium',
  () => {
    let h: AuthHarness;
    let site: Server;
    let siteUrl: string;
    let context: BrowserContext;
    let profile: string;
    const preflights: string[] = [];

    beforeAll(async () => {
      h = await startAuth(sqlite!, { admin: true });
      site = createServer((_req, res) => {
        res.setHeader('content-type', 'text/html');
        res.end('<!doctype html><title>editor</title><p>editor</p>');
      });
      await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
      const address = site.address();
      if (address === null || typeof address === 'string') throw new Error('no port');
      // Another origin: another host name for the same loopback address.
      siteUrl = `http://localhost:${address.port}`;
      h.server.server.on('request', (req) => {
        if (req.method === 'OPTIONS') preflights.push(String(req.url));
      });
      profile = mkdtempSync(join(tmpdir(), 'sync-host-cors-'));
      context = await chromium.launchPersistentContext(profile, {
        executablePath: chromiumPath,
        headless: true,
        args: chromiumFlags,
      });
    });
    afterAll(async () => {
      await context?.close();
      await new Promise<void>((resolve) => site?.close(() => resolve()));
      await h?.close();
      rmSync(profile, { recursive: true, force: true });
    });

    it('reads discovery, starts a pairing after a preflight, and cannot read the admin API', async () => {
      const page = await context.newPage();
      await page.goto(siteUrl);
      const result = await page.evaluate(
        async ({ auth, token }) => {
          const info = await (await fetch(`${auth}/.well-known/sync-host`)).json();
          const pairRes = await fetch(`${auth}/auth/pair`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ deviceName: 'browser', platform: 'web' }),
          });
          let admin = 'readable';
          try {
            await fetch(`${auth}/admin/api/users`, {
              headers: { authorization: `Bearer ${token}` },
            });
          } catch {
            admin = 'blocked';
          }
          return { info, pairStatus: pairRes.status, pair: await pairRes.json(), admin };
        },
        { auth: h.url, token: adminToken },
      );
      expect(result.info).toMatchObject({ authUrl: h.url });
      expect(result.pairStatus).toBe(201);
      expect(result.pair).toMatchObject({ code: expect.stringMatching(/^[A-Z]{4}-[A-Z]{4}$/) });
      expect(result.admin).toBe('blocked');
      expect(preflights).toContain('/auth/pair');
    });
  },
);
