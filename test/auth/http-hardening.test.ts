import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AuthHarness, startAuth } from '../helpers/auth-harness.ts';
import { dbTargets } from '../helpers/databases.ts';

const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const [sqlite] = await dbTargets();
if (!sqlite) throw new Error('no sqlite target');

/** A raw POST over node:http, so the body bytes and Content-Encoding are exactly ours. */
function post(
  url: string,
  path: string,
  body: Buffer,
  headers: Record<string, string>,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}${path}`,
      {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-length': String(body.length),
          ...headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('request bodies with a content encoding', () => {
  let h: AuthHarness;
  beforeAll(async () => {
    h = await startAuth(sqlite);
  });
  afterAll(async () => {
    await h?.close();
  });

  const json = Buffer.from(JSON.stringify({ email: 'zip@example.com' }));

  it('accepts a valid gzip body', async () => {
    const res = await post(h.url, '/auth/magic-link', gzipSync(json), {
      'content-encoding': 'gzip',
    });
    expect(res).toEqual({ status: 200, body: '{"sent":true}' });
  });

  it('answers 400 invalid_request to a corrupt gzip body, logging one line without a stack', async () => {
    const before = h.logs.length;
    const corrupt = gzipSync(json);
    corrupt.fill(0x41, 10, corrupt.length - 8);
    for (const body of [corrupt, Buffer.from('not gzip at all'), gzipSync(json).subarray(0, 12)]) {
      const res = await post(h.url, '/auth/magic-link', body, { 'content-encoding': 'gzip' });
      expect(res.status).toBe(400);
      expect(JSON.parse(res.body)).toEqual({
        error: { code: 'invalid_request', message: 'body could not be decompressed (gzip)' },
      });
    }
    const lines = h.logs.slice(before);
    expect(lines).toHaveLength(3);
    for (const line of lines) {
      expect(line).toContain('request body refused');
      expect(line).not.toMatch(/\bat .*\(|stack/);
    }
  });

  it('answers 415 unsupported_media_type to an unknown Content-Encoding, logging one line without a stack', async () => {
    const before = h.logs.length;
    const res = await post(h.url, '/auth/magic-link', json, { 'content-encoding': 'x-snappy' });
    expect(res.status).toBe(415);
    expect(JSON.parse(res.body)).toEqual({
      error: {
        code: 'unsupported_media_type',
        message: 'Content-Encoding "x-snappy" is not supported (use gzip, deflate, br or none)',
      },
    });
    const lines = h.logs.slice(before);
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toMatch(/\bat .*\(|stack/);
    expect(h.logs.some((l) => l.includes('unhandled error'))).toBe(false);
  });

  it('keeps the 16 KiB limit on the decompressed size', async () => {
    const big = Buffer.from(JSON.stringify({ email: 'zip@example.com', pad: 'x'.repeat(64_000) }));
    const res = await post(h.url, '/auth/magic-link', gzipSync(big), {
      'content-encoding': 'gzip',
    });
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body).error.code).toBe('payload_too_large');
  });
});

describe('security headers of the HTML pages', () => {
  let h: AuthHarness;
  beforeAll(async () => {
    h = await startAuth(sqlite);
  });
  afterAll(async () => {
    await h?.close();
  });

  const page = (path: string) => h.request('GET', path, { headers: { accept: 'text/html' } });
  const hashes = (html: string, tag: 'script' | 'style') =>
    [...html.matchAll(new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`, 'g'))].map(
      (m) =>
        `'sha256-${createHash('sha256')
          .update(m[1] ?? '')
          .digest('base64')}'`,
    );

  it('sends CSP, frame protection, nosniff and no referrer with the verify page, allowing only its own inline script and style', async () => {
    await h.request('GET', '/auth/login?email=page@example.com');
    const token = await h.linkToken('page@example.com');
    for (const path of [
      '/auth/verify?token=unknown',
      `/auth/verify?token=${token}&deviceName=laptop&platform=linux`,
    ]) {
      const res = await page(path);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      const csp = res.headers.get('content-security-policy') ?? '';
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).toContain("base-uri 'none'");
      expect(csp).not.toContain('unsafe-inline');
      expect(res.headers.get('x-frame-options')).toBe('DENY');
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      expect(res.headers.get('referrer-policy')).toBe('no-referrer');
      const html = await res.text();
      const styles = hashes(html, 'style');
      expect(styles.length).toBeGreaterThan(0);
      for (const hash of styles) expect(csp).toContain(hash);
      for (const hash of hashes(html, 'script')) expect(csp).toContain(hash);
    }
  });

  it('sends frame protection, nosniff and no referrer with JSON answers too', async () => {
    const res = await h.request('GET', '/auth/verify?token=unknown');
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
  });
});

describe.skipIf(!existsSync(chromiumPath))('the verify pages under their CSP in Chromium', () => {
  it('the confirm and result pages apply their style and run the copy button without a CSP violation', async () => {
    const h = await startAuth(sqlite);
    const profile = mkdtempSync(join(tmpdir(), 'sync-host-chromium-'));
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: chromiumPath,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'],
    });
    try {
      const page = context.pages()[0] ?? (await context.newPage());
      const violations: string[] = [];
      page.on('console', (m) => {
        if (m.text().includes('Content Security Policy')) violations.push(m.text());
      });
      await h.request('GET', '/auth/login?email=browser@example.com');
      const token = await h.linkToken('browser@example.com');
      await page.goto(`${h.url}/auth/verify?token=${token}&deviceName=laptop&platform=linux`);
      // The confirm page, then (its form post) the result page with the copy button.
      expect(await page.locator('body').evaluate((b) => getComputedStyle(b).maxWidth)).toBe(
        '576px',
      );
      await page.locator('button[type="submit"]').click();
      await page.locator('#copy').waitFor();
      expect(await page.locator('body').evaluate((b) => getComputedStyle(b).maxWidth)).toBe(
        '576px',
      );
      await page.locator('#copy').click();
      await expect.poll(() => page.locator('#copied').textContent()).toBe('Copied');
      expect(violations).toEqual([]);
    } finally {
      await context.close();
      await h.close();
      rmSync(profile, { recursive: true, force: true });
    }
  });
});
