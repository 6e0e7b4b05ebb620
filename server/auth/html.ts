import { createHash } from 'node:crypto';
import type { Response } from 'express';

const escapes: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** Escapes text for HTML element content and attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => escapes[c] ?? c);
}

const sha256Source = (text: string): string =>
  `'sha256-${createHash('sha256').update(text).digest('base64')}'`;

/**
 * The Content-Security-Policy of one page: nothing from anywhere but the page's own inline
 * `<script>` and `<style>` blocks (by hash), forms posting to this origin, never framed.
 */
export function pageCsp(html: string): string {
  const sources = (tag: 'script' | 'style') => {
    const hashes = [...html.matchAll(new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`, 'g'))].map((m) =>
      sha256Source(m[1] ?? ''),
    );
    return hashes.length === 0 ? "'none'" : hashes.join(' ');
  };
  return [
    "default-src 'none'",
    `script-src ${sources('script')}`,
    `style-src ${sources('style')}`,
    "img-src 'self' data:",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/** Sends an HTML page with its CSP (the other security headers are set for every answer). */
export function sendPage(res: Response, status: number, html: string): void {
  res.status(status).set('Content-Security-Policy', pageCsp(html)).type('html').send(html);
}

/**
 * The page a browser gets when it opens a link: a button that POSTs the link's fields
 * (form-encoded) back to /auth/verify, so fetching the link alone never uses it up.
 */
export function confirmPage(
  title: string,
  message: string,
  button: string,
  fields: Record<string, string | undefined>,
): string {
  const inputs = Object.entries(fields)
    .filter((entry): entry is [string, string] => entry[1] !== undefined)
    .map(
      ([name, value]) =>
        `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`,
    )
    .join('');
  return page(
    title,
    `<p>${escapeHtml(message)}</p>
<form method="post" action="/auth/verify">${inputs}<button type="submit">${escapeHtml(button)}</button></form>`,
  );
}

/**
 * The small page a browser gets when it opens a login link: the result and, on success, the
 * token to paste into the client with a copy button. No external resources, no inline script
 * beyond the copy handler.
 */
export function verifyPage(
  title: string,
  message: string,
  secret?: { label: string; value: string },
): string {
  const secretBlock = secret
    ? `<p>${escapeHtml(secret.label)}</p>
<textarea id="value" readonly rows="3">${escapeHtml(secret.value)}</textarea>
<p><button type="button" id="copy">Copy</button> <span id="copied" role="status"></span></p>
<script>
document.getElementById('copy').addEventListener('click', async () => {
  const value = document.getElementById('value');
  value.select();
  try { await navigator.clipboard.writeText(value.value); } catch { document.execCommand('copy'); }
  document.getElementById('copied').textContent = 'Copied';
});
</script>`
    : '';
  return page(title, `<p>${escapeHtml(message)}</p>${secretBlock}`);
}

/**
 * What a browser gets at the auth URL itself (`GET /`), which is what the admin UI's QR code
 * holds: where this host is and how a device gets in. Nothing secret, nothing that changes.
 */
export function welcomePage(authUrl: string): string {
  const url = escapeHtml(authUrl);
  return page(
    'This is a sync-host',
    `<p>This address is the host's sign-in service: <code>${url}</code>.</p>
<p>To add a device, install sync-host on it and run</p>
<pre>sync-host login --auth ${url}</pre>
<p>It shows a code. Approve the code in the admin UI on the host's machine (Pair a device) or,
from a device that is already signed in, with <code>sync-host pair approve &lt;code&gt;</code>.</p>`,
  );
}

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${escapeHtml(title)} · sync-host</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem;color:#222}
textarea{width:100%;font:14px monospace}pre{overflow-x:auto;background:#f4f4f4;padding:.5rem}button{font:inherit;padding:.3rem 1rem}</style></head>
<body><h1>${escapeHtml(title)}</h1>${body}</body></html>
`;
}
