import type { z } from 'zod';
import { type ConfEntry, ConfigError } from './conf-file.ts';
import { closestKey } from './suggest.ts';

/** The accepted spellings of each configuration key, attached to the key's schema. */
const spellings = new WeakMap<z.ZodType, readonly string[]>();

/**
 * Marks a schema as the configuration key spelled `names` (case-insensitive; the first spelling
 * names the key in error messages). Each key is written once: its spellings, its schema with its
 * default, and its doc comment, in the config file's schema.
 */
export function configKey<S extends z.ZodType>(schema: S, ...names: [string, ...string[]]): S {
  const own = schema.clone();
  spellings.set(own, names);
  return own;
}

/** Every spelling per field of an object schema whose fields were made with `configKey`. */
export function keyNamesOf(
  shape: Readonly<Record<string, z.ZodType>>,
): Record<string, readonly string[]> {
  return Object.fromEntries(
    Object.entries(shape).map(([field, schema]) => [field, spellings.get(schema) ?? [field]]),
  );
}

/** Where a configuration value came from, to name it in an error. */
export interface Origin {
  file: string;
  line?: number;
  key: string;
}

/** A key this version does not know, with the known spelling it is closest to (a likely typo). */
export interface UnknownKey extends Origin {
  suggestion?: string | undefined;
}

export interface Collected {
  values: Record<string, string>;
  origins: Record<string, Origin>;
  unknown: UnknownKey[];
}

/**
 * Maps the entries of a conf file onto schema fields. `names` lists, per field, every spelling
 * accepted for it (`DB_HOST`, `db.host`); a later line wins over an earlier one.
 */
export function collectKeys(
  entries: readonly ConfEntry[],
  names: Readonly<Record<string, readonly string[]>>,
  file: string,
): Collected {
  const byName = new Map<string, string>();
  for (const [field, spellings] of Object.entries(names)) {
    for (const spelling of spellings) byName.set(spelling.toLowerCase(), field);
  }
  const collected: Collected = { values: {}, origins: {}, unknown: [] };
  for (const entry of entries) {
    const field = byName.get(entry.key.toLowerCase());
    if (field === undefined) {
      const suggestion = closestKey(entry.key, Object.values(names).flat());
      collected.unknown.push({ file, line: entry.line, key: entry.key, suggestion });
      continue;
    }
    collected.values[field] = entry.value;
    collected.origins[field] = { file, line: entry.line, key: entry.key };
  }
  return collected;
}

/** Warning lines for unknown keys: `auth.conf:3: DB_PASWORD (did you mean DB_PASS?)`. */
export function unknownKeyLines(collected: Collected): string[] {
  return collected.unknown.map(
    (u) =>
      `${u.file}:${u.line}: ${u.key}${u.suggestion === undefined ? '' : ` (did you mean ${u.suggestion}?)`}`,
  );
}

/** Overrides collected values with environment variables named like the upper-case keys. */
export function applyEnv(
  collected: Collected,
  envNames: Readonly<Record<string, string>>,
  env: NodeJS.ProcessEnv,
): void {
  for (const [field, name] of Object.entries(envNames)) {
    const value = env[name];
    if (value === undefined) continue;
    collected.values[field] = value;
    collected.origins[field] = { file: 'environment', key: name };
  }
}

/** The upper-case spelling of a dotted key: `rate.perSecond` → `RATE_PER_SECOND`. */
export function upperKey(dotted: string): string {
  return dotted
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .replace(/\./g, '_')
    .toUpperCase();
}

/** Validates collected values with a zod schema; every problem becomes a ConfigError line. */
export function validateKeys<S extends z.ZodType>(
  schema: S,
  collected: Collected,
  file: string,
  names: Readonly<Record<string, readonly string[]>>,
): z.infer<S> {
  const result = schema.safeParse(collected.values);
  if (result.success) return result.data;
  throw new ConfigProblems(
    result.error.issues.map((issue) => {
      const field = String(issue.path[0] ?? '');
      const origin = collected.origins[field];
      const key = origin?.key ?? names[field]?.[0] ?? field;
      return new ConfigError(origin?.file ?? file, origin?.line, key, issue.message);
    }),
  );
}

/** Several configuration mistakes found at once; each prints as its own line. */
export class ConfigProblems extends Error {
  constructor(readonly problems: ConfigError[]) {
    super(problems.map((p) => p.message).join('\n'));
    this.name = 'ConfigProblems';
  }
}
