import { accessSync, constants } from 'node:fs';
import { isAbsolute } from 'node:path';
import { z } from 'zod';
import { switchSchema } from './common.ts';
import { configKey } from './keys.ts';

/** An absolute path to a file this process can read (checked at start: exit 2 on a bad one). */
const readableFile = z
  .string()
  .trim()
  .min(1)
  .refine(isAbsolute, { error: 'must be an absolute path' })
  .refine(
    (path) => {
      try {
        accessSync(path, constants.R_OK);
        return true;
      } catch {
        return false;
      }
    },
    { error: 'must name a file this process can read' },
  )
  .optional();

const text = z.string().optional();

/**
 * How a process proves itself to NATS (`cluster.nats`), in auth.conf and relay.conf alike: at most
 * one way (user and password, a token, an nkey seed file or a `.creds` file), and a CA file for
 * `tls://` servers signed by a private CA. Each key in both spellings (`cluster.user`,
 * `CLUSTER_USER`); `first` orders them as the file kind names its keys.
 */
export function natsAccessKeys(first: 'dotted' | 'upper') {
  const key = <S extends z.ZodType>(schema: S, dotted: string, upper: string): S =>
    first === 'dotted' ? configKey(schema, dotted, upper) : configKey(schema, upper, dotted);
  return {
    /** NATS user name (with `cluster.password`). */
    clusterUser: key(text, 'cluster.user', 'CLUSTER_USER'),
    /** NATS password of `cluster.user`. */
    clusterPassword: key(text, 'cluster.password', 'CLUSTER_PASSWORD'),
    /** NATS authorization token. */
    clusterToken: key(text, 'cluster.token', 'CLUSTER_TOKEN'),
    /** File holding an nkey seed (`SU...`). */
    clusterNkeyFile: key(readableFile, 'cluster.nkeyFile', 'CLUSTER_NKEY_FILE'),
    /** A `.creds` file (user JWT and its nkey seed). */
    clusterCredsFile: key(readableFile, 'cluster.credsFile', 'CLUSTER_CREDS_FILE'),
    /** PEM file of the CA that signed the NATS servers' certificates; set, TLS is required. */
    clusterCaFile: key(readableFile, 'cluster.caFile', 'CLUSTER_CA_FILE'),
    /**
     * Runs on a NATS that lets in clients without credentials (a test bench, a closed network),
     * with a warning at every start; off, such a NATS is refused.
     */
    clusterInsecure: key(switchSchema.default(false), 'cluster.insecure', 'CLUSTER_INSECURE'),
  };
}

/** The NATS access settings of a configuration (auth.conf's or relay.conf's). */
export interface NatsAccess {
  clusterUser?: string | undefined;
  clusterPassword?: string | undefined;
  clusterToken?: string | undefined;
  clusterNkeyFile?: string | undefined;
  clusterCredsFile?: string | undefined;
  clusterCaFile?: string | undefined;
  /**
   * Whether a NATS that lets in clients without credentials is refused (a process's own
   * connections, from `cluster.insecure` being off); unset, it is only warned about.
   */
  refuseOpen?: boolean | undefined;
}

/**
 * What is wrong with a combination of NATS access keys, as `[field, message]`; none when it is
 * usable. The names in the messages are `names`' first spellings of the fields.
 */
export function natsAccessProblems(
  access: NatsAccess,
  name: (field: keyof NatsAccess) => string,
): Array<[keyof NatsAccess, string]> {
  const problems: Array<[keyof NatsAccess, string]> = [];
  const set = (value: string | undefined) => value !== undefined && value !== '';
  if (set(access.clusterPassword) && !set(access.clusterUser)) {
    problems.push([
      'clusterPassword',
      `is set without ${name('clusterUser')} (the user it belongs to)`,
    ]);
  }
  if (set(access.clusterUser) && !set(access.clusterPassword)) {
    problems.push(['clusterUser', `is set without ${name('clusterPassword')}`]);
  }
  const ways = (['clusterUser', 'clusterToken', 'clusterNkeyFile', 'clusterCredsFile'] as const)
    .filter((field) => set(access[field]))
    .map(name);
  if (ways.length > 1) {
    problems.push([
      'clusterToken',
      `set only one way to sign in to NATS, not ${ways.join(' and ')}`,
    ]);
  }
  return problems;
}

/** The access fields of a configuration, for the NATS connection. */
export function natsAccessOf(config: NatsAccess & { clusterInsecure?: boolean }): NatsAccess {
  return {
    refuseOpen: config.clusterInsecure !== true,
    clusterUser: config.clusterUser,
    clusterPassword: config.clusterPassword,
    clusterToken: config.clusterToken,
    clusterNkeyFile: config.clusterNkeyFile,
    clusterCredsFile: config.clusterCredsFile,
    clusterCaFile: config.clusterCaFile,
  };
}

/** `natsAccessProblems` as zod issues on the fields, for a schema's `superRefine`. */
export function refineNatsAccess(names: Readonly<Record<string, readonly string[]>>) {
  return (access: NatsAccess, ctx: z.RefinementCtx): void => {
    const name = (field: keyof NatsAccess) => names[field]?.[0] ?? field;
    for (const [field, message] of natsAccessProblems(access, name)) {
      ctx.addIssue({ code: 'custom', path: [field], message });
    }
  };
}
