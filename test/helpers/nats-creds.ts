import { nkeys } from '@nats-io/transport-node';

type KeyPair = ReturnType<typeof nkeys.createUser>;

const base64url = (bytes: Uint8Array | string): string => Buffer.from(bytes).toString('base64url');

/** A NATS JWT (v2) of `subject`, signed by `issuer`'s nkey, with `nats` as its claims. */
function natsJwt(issuer: KeyPair, subject: string, name: string, nats: object): string {
  const header = base64url(JSON.stringify({ typ: 'JWT', alg: 'ed25519-nkey' }));
  const claims = {
    // nats-server reads the id, it does not check how it was made
    jti: randomId(),
    iat: Math.floor(Date.now() / 1000),
    iss: issuer.getPublicKey(),
    name,
    sub: subject,
    nats: { ...nats, version: 2 },
  };
  const body = base64url(JSON.stringify(claims));
  const signature = issuer.sign(new TextEncoder().encode(`${header}.${body}`));
  return `${header}.${body}.${base64url(signature)}`;
}

const randomId = (): string =>
  Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('hex');

/** Decentralised NATS authorization in a test: a server's configuration lines and a user's `.creds` file. */
export interface NatsOperatorSetup {
  /** `operator`, `resolver: MEMORY` and the account preloaded, for a nats-server file. */
  serverConfig: string;
  /** The text of a `.creds` file of one user of that account (its JWT and nkey seed). */
  creds: string;
}

/** An operator, one account it signed and one user of that account, made with nkeys. */
export function natsOperatorSetup(): NatsOperatorSetup {
  const operator = nkeys.createOperator();
  const account = nkeys.createAccount();
  // JetStream (-js) in operator mode needs a system account
  const system = nkeys.createAccount();
  const user = nkeys.createUser();
  const unlimited = {
    subs: -1,
    conn: -1,
    leaf: -1,
    imports: -1,
    exports: -1,
    data: -1,
    payload: -1,
  };
  const operatorJwt = natsJwt(operator, operator.getPublicKey(), 'operator', { type: 'operator' });
  const accountJwt = natsJwt(operator, account.getPublicKey(), 'sync', {
    type: 'account',
    limits: { ...unlimited, wildcards: true },
  });
  const systemJwt = natsJwt(operator, system.getPublicKey(), 'SYS', {
    type: 'account',
    limits: unlimited,
  });
  const userJwt = natsJwt(account, user.getPublicKey(), 'relay', {
    type: 'user',
    pub: {},
    sub: {},
    subs: -1,
    data: -1,
    payload: -1,
  });
  const seed = new TextDecoder().decode(user.getSeed());
  return {
    serverConfig: [
      `operator: ${operatorJwt}`,
      'resolver: MEMORY',
      `system_account: ${system.getPublicKey()}`,
      `resolver_preload: { ${account.getPublicKey()}: ${accountJwt}, ${system.getPublicKey()}: ${systemJwt} }`,
    ].join('\n'),
    creds: [
      '-----BEGIN NATS USER JWT-----',
      userJwt,
      '------END NATS USER JWT------',
      '',
      '-----BEGIN USER NKEY SEED-----',
      seed,
      '------END USER NKEY SEED------',
      '',
    ].join('\n'),
  };
}
