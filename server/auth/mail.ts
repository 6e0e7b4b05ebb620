import nodemailer from 'nodemailer';
import type { SmtpConfig } from '../config/auth-config.ts';
import type { Logger } from '../log.ts';

/** Delivers a login link: by SMTP, or printed on stdout in development mode. */
export interface Mailer {
  readonly devMode: boolean;
  sendLoginLink(email: string, token: string, link: string): Promise<void>;
  close(): void;
}

/**
 * Development mode: prints the line `[dev] Magic link token for <email>: <token>` on stdout,
 * then the link itself, so a person at the host's terminal opens it (and presses its button)
 * instead of copying a token.
 */
export function createDevMailer(print: (line: string) => void): Mailer {
  return {
    devMode: true,
    sendLoginLink: async (email, token, link) => {
      print(`[dev] Magic link token for ${email}: ${token}`);
      print(`[dev] Sign-in link for ${email}: ${link}`);
    },
    close: () => {},
  };
}

/** SMTP through nodemailer; port 465 uses TLS from the start, others STARTTLS when offered. */
export function createSmtpMailer(config: SmtpConfig, logger: Logger): Mailer {
  const transport = nodemailer.createTransport({
    host: config.host,
    port: config.port,
    secure: config.port === 465,
    auth: config.user ? { user: config.user, pass: config.password ?? '' } : undefined,
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 20_000,
    tls: { rejectUnauthorized: config.host !== '127.0.0.1' && config.host !== 'localhost' },
  });
  return {
    devMode: false,
    async sendLoginLink(email, _token, link) {
      await transport.sendMail({
        from: config.from,
        to: email,
        subject: 'Your sync-host sign-in link',
        text: `Open this link to sign in to sync-host (valid for 15 minutes, usable once):\n\n${link}\n\nIf you did not ask for it, ignore this e-mail.\n`,
      });
      logger.info({ to: email }, 'login link e-mailed');
    },
    close: () => transport.close(),
  };
}
