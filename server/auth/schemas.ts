import { z } from 'zod';
import { AppError } from './errors.ts';

/**
 * Refuses a NUL character: PostgreSQL cannot store one in a text column, and no name, key or
 * token has one, so every string field is checked here instead of failing in the database.
 */
export const withoutNul = [
  (v: string) => !v.includes('\u0000'),
  { error: 'must not contain a NUL character' },
] as const;

/** A string of at most `max` characters without NUL (tokens, JWTs: not trimmed). */
export const rawString = (max: number) =>
  z
    .string({ error: (issue) => (issue.input === undefined ? 'is required' : 'must be a string') })
    .max(max, { error: 'is too long' })
    .refine(...withoutNul);

/** Trimmed, lower-cased, a valid address of at most 255 characters. */
export const emailSchema = z
  .string({ error: 'must be a string' })
  .refine(...withoutNul)
  .trim()
  .toLowerCase()
  .pipe(
    z
      .email({ error: 'must be a valid e-mail address' })
      .max(255, { error: 'must be at most 255 characters' }),
  );

/** A required string field of at most `max` characters (after trimming), not empty. */
export const text = (max: number) =>
  z
    .string({ error: 'must be a string' })
    .trim()
    .min(1, { error: 'must not be empty' })
    .max(max, { error: `must be at most ${max} characters` })
    .refine(...withoutNul);

export const deviceInputSchema = z.object({ deviceName: text(255), platform: text(50) });

/** A path id: a positive whole number. */
export const idSchema = z
  .string()
  .regex(/^[1-9]\d{0,15}$/, { error: 'must be a positive whole number' })
  .transform(Number)
  .refine(Number.isSafeInteger, { error: 'is too large' });

/** Parses input with a schema; the first problem becomes 400 `invalid_request` naming the field. */
export function parseInput<S extends z.ZodType>(
  schema: S,
  input: unknown,
  where: string,
): z.infer<S> {
  const result = schema.safeParse(input ?? {});
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const field = issue?.path.length ? issue.path.join('.') : where;
  const message =
    issue?.code === 'invalid_type' && issue.path.length > 0 && issue.message.includes('undefined')
      ? 'is required'
      : (issue?.message ?? 'is invalid');
  throw new AppError('invalid_request', `${field} ${message}`);
}
