import type { Db } from '../db/connect.ts';
import { createMagicLink, findMagicLink } from '../db/magic-links.ts';
import { findUserByEmail } from '../db/users.ts';
import { randomHex } from '../hashing.ts';
import type { Logger } from '../log.ts';
import { AppError } from './errors.ts';
import type { Mailer } from './mail.ts';
import { type AuthLimits, Limiter } from './rate-limits.ts';
import type { AuthSettings } from './settings.ts';

/** Magic links are valid 15 minutes. */
export const linkLifetimeMs = 15 * 60_000;

/** A link printed in development mode and shown in the admin UI until it is used or expires. */
export interface PendingLink {
  email: string;
  token: string;
  link: string;
  createdAt: string;
  expiresAt: string;
}

/** Whether an e-mail is matched by ALLOWED_EMAILS (exact addresses or `*@domain`). */
export function isAllowedEmail(email: string, patterns: readonly string[]): boolean {
  const domain = email.slice(email.lastIndexOf('@') + 1);
  return patterns.some((p) => p === email || (p.startsWith('*@') && p.slice(2) === domain));
}

export interface LoginLinksOptions {
  db: Db;
  settings: Pick<AuthSettings, 'baseUrl' | 'signup' | 'allowedEmails'>;
  mailer: Mailer;
  logger: Logger;
  now: () => number;
  limits: Pick<AuthLimits, 'linksPerEmail' | 'linksPerClient' | 'verifiesPerClient'>;
}

/**
 * Magic links: issuing (rate-limited, allowlist-checked, mailed or printed), looking one up for
 * a verify, and the dev-mode list of links not used yet.
 */
export function createLoginLinks(options: LoginLinksOptions) {
  const { db, settings, mailer, logger, now, limits } = options;
  const linksPerEmail = new Limiter('links per e-mail', limits.linksPerEmail, logger);
  const linksPerClient = new Limiter('links per client', limits.linksPerClient, logger);
  const verifiesPerClient = new Limiter('verifies per client', limits.verifiesPerClient, logger);
  const pending = createPendingLinks(now);

  /** Counts a failed verify against the client address: 429 beyond the limit, else `error`. */
  async function verifyFailure(client: string, error: AppError): Promise<AppError> {
    await verifiesPerClient.consume(client);
    return error;
  }

  return {
    verifyFailure,

    /** The unused, unexpired link of a token, else the reason as an AppError; counts per client. */
    async usableLink(token: string, client: string) {
      const link = /^[0-9a-f]{64}$/.test(token) ? await findMagicLink(db, token) : undefined;
      if (link === undefined) {
        logger.warn({ client }, 'verify with an unknown link token');
        throw await verifyFailure(
          client,
          new AppError('invalid_token', 'this login link is not valid'),
        );
      }
      if (link.used)
        throw await verifyFailure(
          client,
          new AppError('token_used', 'this login link was already used'),
        );
      if (Date.parse(link.expiresAt) <= now())
        throw await verifyFailure(
          client,
          new AppError('token_expired', 'this login link has expired'),
        );
      return link;
    },

    /**
     * Creates and sends (or prints) a magic link; returns its token, or undefined when the
     * allowlist refuses the address (logged, no link created).
     */
    async issueLink(email: string, client: string): Promise<string | undefined> {
      await linksPerClient.consume(client);
      await linksPerEmail.consume(email);
      if (settings.signup === 'allowlist' && !isAllowedEmail(email, settings.allowedEmails)) {
        if ((await findUserByEmail(db, email)) === undefined) {
          logger.info({ email, client }, 'login refused: e-mail not on the allowlist');
          return undefined;
        }
      }
      const token = randomHex(32);
      const created = new Date(now());
      const expires = new Date(created.getTime() + linkLifetimeMs);
      await createMagicLink(db, email, token, created, expires);
      const link = `${settings.baseUrl}/auth/verify?token=${token}`;
      await mailLink(mailer, logger, { email, token, link });
      if (mailer.devMode) {
        pending.add({
          email,
          token,
          link,
          createdAt: created.toISOString(),
          expiresAt: expires.toISOString(),
        });
      }
      logger.info({ email }, 'login link created');
      return token;
    },

    /** Drops a used link from the dev-mode list. */
    forgetPending(token: string): void {
      pending.forget(token);
    },

    /** Dev-mode links not used and not expired, newest first (admin UI). */
    pendingLinks: (): PendingLink[] => pending.list(),
  };
}

/** Sends a login link; a mail server that fails is `unavailable` (try again in 30 s). */
async function mailLink(
  mailer: Mailer,
  logger: Logger,
  { email, token, link }: { email: string; token: string; link: string },
): Promise<void> {
  try {
    await mailer.sendLoginLink(email, token, link);
  } catch (err: unknown) {
    logger.error(
      { email, err: err instanceof Error ? err.message : String(err) },
      'login e-mail could not be sent',
    );
    throw new AppError('unavailable', 'the login e-mail could not be sent; try again later', 30);
  }
}

/** The dev-mode list of links not used yet, the expired ones dropped as it is read or added to. */
function createPendingLinks(now: () => number) {
  const pending = new Map<string, PendingLink>();
  const prune = (): void => {
    const at = now();
    for (const [token, link] of pending)
      if (Date.parse(link.expiresAt) <= at) pending.delete(token);
  };
  return {
    add(link: PendingLink): void {
      prune();
      pending.set(link.token, link);
    },
    forget(token: string): void {
      pending.delete(token);
    },
    list(): PendingLink[] {
      prune();
      return [...pending.values()].reverse();
    },
  };
}
