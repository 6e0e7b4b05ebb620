import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { afterEach, describe, expect, it } from 'vitest';
import { type AuthHarness, startAuth } from '../helpers/auth-harness.ts';
import { dbTargets } from '../helpers/databases.ts';
import { eventually } from '../helpers/wait.ts';

const [sqlite] = await dbTargets();
if (!sqlite) throw new Error('no sqlite target');

const decodeQuotedPrintable = (text: string) =>
  text
    .replace(/=\r?\n/g, '')
    .replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));

interface Received {
  from: string;
  to: string[];
  data: string;
}

async function startSmtp(): Promise<{ port: number; mails: Received[]; close(): Promise<void> }> {
  const mails: Received[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, done) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        mails.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          data: Buffer.concat(chunks).toString('utf8'),
        });
        done();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.server.address() as AddressInfo).port;
  return { port, mails, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

describe('login e-mail over SMTP', () => {
  let h: AuthHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('sends the login link to a real SMTP server and prints nothing on stdout', async () => {
    const smtp = await startSmtp();
    try {
      h = await startAuth(sqlite, {
        conf: {
          SMTP_HOST: '127.0.0.1',
          SMTP_PORT: String(smtp.port),
          SMTP_FROM: 'sync <sync@host.example>',
        },
      });
      const res = await h.request('GET', '/auth/login?email=Mail.User@Example.com');
      expect(res.status).toBe(200);
      const mail = await eventually(() => smtp.mails[0], 'a mail');
      expect(mail.to).toEqual(['mail.user@example.com']);
      expect(mail.from).toBe('sync@host.example');
      const link = new RegExp(
        `${h.url.replace(/[.:/]/g, '\\$&')}/auth/verify\\?token=([0-9a-f]{64})`,
      ).exec(decodeQuotedPrintable(mail.data));
      expect(link).not.toBeNull();
      expect(h.printed).toEqual([]);
      const verify = await h.request(
        'GET',
        `/auth/verify?token=${link?.[1]}&deviceName=mail&platform=linux`,
      );
      expect(verify.status).toBe(200);
    } finally {
      await smtp.close();
    }
  });

  it('answers 503 unavailable and logs the failure when the mail server is down', async () => {
    const smtp = await startSmtp();
    const port = smtp.port;
    await smtp.close();
    h = await startAuth(sqlite, { conf: { SMTP_HOST: '127.0.0.1', SMTP_PORT: String(port) } });
    const res = await h.request('POST', '/auth/magic-link', {
      body: { email: 'nomail@example.com' },
    });
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('unavailable');
    expect(
      h.logs.some(
        (l) => l.includes('login e-mail could not be sent') && l.includes('"level":"error"'),
      ),
    ).toBe(true);
  });
});
