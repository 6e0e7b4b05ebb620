import { readFileSync } from 'node:fs';
import {
  type Authenticator,
  type ConnectionOptions,
  connect,
  credsAuthenticator,
  type NatsConnection,
  nkeyAuthenticator,
  tokenAuthenticator,
  usernamePasswordAuthenticator,
} from '@nats-io/transport-node';
import { ConfigError } from '../config/conf-file.ts';
import type { NatsAccess } from '../config/nats-access.ts';
import type { Logger } from '../log.ts';

/**
 * The connection options of `access` (credentials, TLS with a CA): what every connection of this
 * process to NATS adds to its own. The files (checked readable at start) are read here, once.
 * Nothing of them is ever logged.
 */
export function natsConnectOptions(access: NatsAccess = {}): Partial<ConnectionOptions> {
  const options: Partial<ConnectionOptions> = {};
  const authenticator = authenticatorOf(access);
  if (authenticator !== undefined) options.authenticator = authenticator;
  if (access.clusterCaFile !== undefined) options.tls = { caFile: access.clusterCaFile };
  return options;
}

function authenticatorOf(access: NatsAccess): Authenticator | undefined {
  if (access.clusterCredsFile !== undefined) {
    return credsAuthenticator(new Uint8Array(readFileSync(access.clusterCredsFile)));
  }
  if (access.clusterNkeyFile !== undefined) {
    const seed = readFileSync(access.clusterNkeyFile, 'utf8').trim();
    return nkeyAuthenticator(new TextEncoder().encode(seed));
  }
  if (access.clusterToken) return tokenAuthenticator(access.clusterToken);
  if (access.clusterUser) {
    return usernamePasswordAuthenticator(access.clusterUser, access.clusterPassword ?? '');
  }
  return undefined;
}

/** Whether `access` names a way to sign in (anything besides a CA). */
export function hasCredentials(access: NatsAccess = {}): boolean {
  return authenticatorOf(access) !== undefined;
}

/**
 * Whether the NATS server `nc` is connected to lets in a client that shows no credentials: its
 * INFO says no authorization is required, or (a server with `no_auth_user`) a connection
 * without credentials, with the same TLS settings, is accepted.
 */
export async function acceptsAnonymous(nc: NatsConnection, access: NatsAccess): Promise<boolean> {
  if (nc.info?.auth_required !== true) return true;
  const server = nc.getServer();
  const tls = access.clusterCaFile === undefined ? {} : { tls: { caFile: access.clusterCaFile } };
  try {
    const anonymous = await connect({
      servers: server,
      ...tls,
      timeout: 2_000,
      reconnect: false,
      name: 'sync-host anonymous check',
    });
    await anonymous.close();
    return true;
  } catch {
    return false;
  }
}

/** Whether this process has said that its NATS lets anyone in (said once). */
let anonymousSaid = false;

/** What a node says of a NATS server that lets in clients without credentials. */
export function openNatsProblem(server: string, insecureKey = 'cluster.insecure'): string {
  return `NATS at ${server} lets in clients without credentials, so anyone who reaches it can read the rooms' traffic and delete their streams: set up authorization on nats-server and the credentials here (docs/cluster.md), or set ${insecureKey}=true to run on it anyway`;
}

/**
 * A process started with `urls` (from `file`) refuses a NATS that lets anyone in: a
 * ConfigError (exit 2, one line) unless `access` allows it.
 */
export async function checkNatsAtStart(
  urls: readonly string[],
  access: NatsAccess,
  file: 'auth.conf' | 'relay.conf',
  logger: Logger,
): Promise<void> {
  if (urls.length === 0) return;
  const [natsKey, insecureKey] =
    file === 'auth.conf'
      ? ['CLUSTER_NATS', 'CLUSTER_INSECURE']
      : ['cluster.nats', 'cluster.insecure'];
  const server = await openNatsAtStart(urls, access);
  if (server === undefined) return;
  if (access.refuseOpen === true) {
    throw new ConfigError(file, undefined, natsKey, openNatsProblem(server, insecureKey));
  }
  anonymousSaid = true;
  logger.warn(
    { nats: server },
    `cluster: ${insecureKey}=true: ${openNatsProblem(server, insecureKey)}`,
  );
}

/**
 * The first NATS server of `urls` that answers, checked once: its address when it lets in
 * clients without credentials; undefined when it does not or when nothing answers yet (the
 * connection made later checks again).
 */
async function openNatsAtStart(
  urls: readonly string[],
  access: NatsAccess,
): Promise<string | undefined> {
  let nc: NatsConnection;
  try {
    nc = await connect({
      servers: [...urls],
      noRandomize: true,
      timeout: 2_000,
      reconnect: false,
      name: 'sync-host start check',
      ...natsConnectOptions(access),
    });
  } catch {
    return undefined;
  }
  try {
    return (await acceptsAnonymous(nc, access)) ? nc.getServer() : undefined;
  } finally {
    await nc.close().catch(() => {});
  }
}

/**
 * Says when the NATS server of a new connection accepts clients without credentials (once per
 * process): whoever reaches it could read the rooms' traffic and publish in them (records
 * without the shared secret's seal are dropped, but the traffic can still be read or deleted).
 */
export function warnIfAnonymous(nc: NatsConnection, access: NatsAccess, logger: Logger): void {
  if (anonymousSaid) return;
  void acceptsAnonymous(nc, access).then((open) => {
    if (!open || anonymousSaid) return;
    anonymousSaid = true;
    logger.warn({ nats: nc.getServer() }, `cluster: ${openNatsProblem(nc.getServer())}`);
  });
}
