import express, { type Express, type Request, type RequestHandler, type Response } from 'express';
import { z } from 'zod';
import { jsonBody, maxBodyBytes } from './body.ts';
import { AppError } from './errors.ts';
import { confirmPage, sendPage, verifyPage } from './html.ts';
import { formatCode } from './pairing.ts';
import { clientOf } from './request.ts';
import { parseInput, rawString, text } from './schemas.ts';
import type { AuthService, Verified } from './service.ts';

const verifyFields = z
  .object({
    token: rawString(255),
    deviceName: text(255).optional(),
    platform: text(50).optional(),
  })
  .refine((q) => (q.deviceName === undefined) === (q.platform === undefined), {
    error: 'deviceName and platform must be given together',
    path: ['deviceName'],
  });
type VerifyFields = z.infer<typeof verifyFields>;

/** Whether the client prefers an HTML page (a browser opening the link). */
const wantsHtml = (req: Request): boolean =>
  req.accepts(['application/json', 'text/html']) === 'text/html';

const deviceOf = (q: VerifyFields) =>
  q.deviceName !== undefined && q.platform !== undefined
    ? { deviceName: q.deviceName, platform: q.platform }
    : undefined;

const parseForm = express.urlencoded({ limit: maxBodyBytes, extended: false });
/** The form post of the confirm page: the one form-encoded body the service accepts (or JSON). */
const formBody: RequestHandler = (req, res, next) =>
  req.is('application/x-www-form-urlencoded')
    ? parseForm(req, res, next)
    : jsonBody(req, res, next);

/**
 * GET and POST /auth/verify. A JSON client verifies with the GET of the API table. A browser's
 * GET only shows what the link is for and a button; the button's form POST uses the link, so
 * mail scanners and link previews that fetch links cannot burn them.
 */
export function addVerifyRoutes(app: Express, service: AuthService, ready: RequestHandler): void {
  const noStore: RequestHandler = (_req, res, next) => {
    res.set('Cache-Control', 'no-store').set('Referrer-Policy', 'no-referrer');
    next();
  };

  app.get('/auth/verify', ready, noStore, async (req, res) => {
    if (!wantsHtml(req)) {
      const q = parseInput(verifyFields, req.query, 'query');
      res.json(await service.verify(q.token, deviceOf(q), clientOf(req)));
      return;
    }
    await htmlAnswer(res, async () => {
      const q = parseInput(verifyFields, req.query, 'query');
      const { email, pairing } = await service.describeLink(q.token, clientOf(req));
      const fields = { token: q.token, deviceName: q.deviceName, platform: q.platform };
      return pairing === undefined
        ? confirmPage(
            'Sign in to sync-host',
            `Sign in as ${email}? The link is used when you press the button.`,
            'Sign in',
            fields,
          )
        : confirmPage(
            'Approve a new device',
            `The device "${pairing.deviceName}" (${pairing.platform}, from ${pairing.clientAddress}) asks to join as ${email}. Approve it only if it shows the code ${formatCode(pairing.code)} and you started it.`,
            'Approve this device',
            fields,
          );
    });
  });

  app.post('/auth/verify', ready, noStore, formBody, async (req, res) => {
    const q = parseInput(verifyFields, req.body, 'body');
    const run = () => service.verify(q.token, deviceOf(q), clientOf(req));
    if (!wantsHtml(req)) {
      res.json(await run());
      return;
    }
    await htmlAnswer(res, async () => resultPage(await run(), service.baseUrl()));
  });
}

/** Sends the page `render` makes, or the HTML form of the AppError it throws. */
async function htmlAnswer(res: Response, render: () => Promise<string>): Promise<void> {
  try {
    sendPage(res, 200, await render());
  } catch (err: unknown) {
    if (!(err instanceof AppError)) throw err;
    if (err.retryAfterSeconds !== undefined) res.set('Retry-After', String(err.retryAfterSeconds));
    sendPage(res, err.status, verifyPage('Sign-in failed', err.message));
  }
}

/** The confirmed page: approved pairing, registered device, or the command that finishes in the CLI. */
function resultPage(result: Verified, authUrl: string): string {
  const signedIn = `Signed in as ${result.user.email}.`;
  if ('pairing' in result) {
    return verifyPage(
      'Device approved',
      `Approved: the device "${result.device.deviceName}" is now signed in as ${result.user.email}. It continues by itself; nothing has to be copied.`,
    );
  }
  if ('deviceToken' in result) {
    return verifyPage('Signed in', `${signedIn} This device is registered.`, {
      label: 'Device token (paste it into your client as syncDeviceToken):',
      value: result.deviceToken,
    });
  }
  return verifyPage(
    'Signed in',
    `${signedIn} To finish, run this command on the computer you are signing in (valid for 15 minutes):`,
    {
      label: 'Command (sync-host login --token also accepts the sign-in code alone):',
      value: `sync-host login --auth ${authUrl} --token ${result.jwt}`,
    },
  );
}
