import { z } from 'zod';
import { AppError } from './errors.ts';

/** Trimmed, lower-cased, a valid address of at most 255 characters. */
export const emailSchema = z
  .string({ error: 'must be a string' })
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
    .max(max, { error: `must be at most ${max} characters` });

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
