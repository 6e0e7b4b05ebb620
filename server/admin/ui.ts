import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Router } from 'express';
import { buildKind, embeddedAsset } from '../build-kind.ts';
import type { Logger } from '../log.ts';
import { ensureRendererBundle, rendererDistDir, rendererSourceDir } from './renderer-bundle.ts';

/** Content-Security-Policy of the admin page: own script and style only, API calls to itself. */
export const adminCsp = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const types: Record<string, string> = {
  'index.html': 'text/html; charset=utf-8',
  'app.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
  'favicon.svg': 'image/svg+xml',
};

export interface AdminUiOptions {
  logger: Logger;
  /** Where the bundle is served from. Default dist/renderer of the repository. */
  distDir?: string;
  /**
   * Sources to (re)build from when the bundle is missing or stale; false: never build (the
   * default of the compiled build and the single executable, whose UI was bundled by the build).
   */
  sourceDir?: string | false;
}

/**
 * Serves the admin UI at /admin/ (index.html, app.js, app.css, favicon.svg) with a strict CSP. The page reads
 * the admin token from the URL fragment, which browsers never send, so it is never in a request.
 */
export function createAdminUiRouter(options: AdminUiOptions): Router {
  const distDir = options.distDir ?? rendererDistDir;
  const sourceDir =
    options.sourceDir ?? (buildKind === 'source' ? rendererSourceDir : (false as const));
  // The single executable carries the bundle inside itself (unless a test names a folder).
  const embedded = buildKind === 'sea' && options.distDir === undefined;
  const ready: Promise<boolean> =
    sourceDir === false
      ? Promise.resolve(true)
      : ensureRendererBundle(sourceDir, distDir).then(
          () => true,
          (err: unknown) => {
            options.logger.error(
              { err: err instanceof Error ? err.message : String(err) },
              'the admin UI could not be built (run npm run build)',
            );
            return false;
          },
        );

  const router = Router();
  router.get(['/index.html', '/app.js', '/app.css', '/favicon.svg', '/'], async (req, res) => {
    // Relative asset URLs need the trailing slash; the fragment survives the redirect.
    if (req.originalUrl.split('?')[0] === '/admin') {
      res.redirect(301, '/admin/');
      return;
    }
    const name = req.path === '/' ? 'index.html' : req.path.slice(1);
    const type = types[name] ?? 'application/octet-stream';
    let body: Buffer | undefined;
    if (await ready) {
      try {
        const asset = embedded ? embeddedAsset(`renderer/${name}`) : undefined;
        body = asset === undefined ? await readFile(join(distDir, name)) : Buffer.from(asset);
      } catch (err: unknown) {
        // A missing file is an unbuilt UI (503 below); anything else is a fault of this host.
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
          options.logger.error(
            { err: err instanceof Error ? err.message : String(err), file: name },
            'the admin UI file could not be read',
          );
          res.status(500).type('text/plain').send('The admin UI could not be read; see the log.\n');
          return;
        }
      }
    }
    res.set({
      'Content-Security-Policy': adminCsp,
      'Referrer-Policy': 'no-referrer',
      'X-Frame-Options': 'DENY',
      'Cache-Control': 'no-cache',
    });
    if (body === undefined) {
      res
        .status(503)
        .type('text/plain')
        .send('The admin UI is not built. Run `npm run build` and restart sync-host.\n');
      return;
    }
    res.type(type).send(body);
  });
  return router;
}
