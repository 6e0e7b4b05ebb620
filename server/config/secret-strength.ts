import { z } from 'zod';

/** The shortest shared secret accepted, in bytes: as long as the HMAC-SHA256 key it becomes. */
export const minSecretBytes = 32;

/** What every refusal tells the user to do. */
const advice = 'set it to the output of `openssl rand -hex 32`';

/**
 * Placeholders that appear, or once appeared, in the documentation (besides anything written
 * `<like this>`): someone who pasted one has a secret that everyone who read the page knows,
 * whatever its length.
 */
const documentedExamples = new Set([
  'a-long-random-string',
  'paste-a-long-random-string-here',
  'the-same-long-random-string-everywhere',
  '<output of openssl rand -hex 32>',
  '$(openssl rand -hex 32)',
]);

/**
 * Why a configured shared secret (`AUTH_SECRET`, relay.conf's `auth.secret`) is refused, or
 * undefined when it is accepted. Absent and empty are the callers' business (generated, or the
 * relay's development mode). The value itself never appears in the answer.
 */
export function weakSecretProblem(value: string | undefined): string | undefined {
  if (value === undefined || value === '') return undefined;
  const trimmed = value.trim();
  if (documentedExamples.has(trimmed) || /^<.*>$/.test(trimmed)) {
    return `is the placeholder from the documentation; ${advice}`;
  }
  const bytes = Buffer.byteLength(value);
  if (bytes < minSecretBytes) {
    return `is ${bytes} bytes long, shorter than the ${minSecretBytes} it needs; ${advice}`;
  }
  return undefined;
}

/** The schema of a shared secret key: any string that weakSecretProblem accepts. */
export const sharedSecretSchema = z
  .string()
  .optional()
  .superRefine((value, ctx) => {
    const problem = weakSecretProblem(value);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
  });
