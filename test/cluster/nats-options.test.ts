import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nkeys } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NatsLink, openNatsLink } from '../../server/cluster/nats-link.ts';
import { acceptsAnonymous } from '../../server/cluster/nats-options.ts';
import { captureLogger } from '../helpers/capture.ts';
import { natsOperatorSetup } from '../helpers/nats-creds.ts';
import { type NatsServer, natsSkipReason, startNatsServer } from '../helpers/nats-server.ts';
import { eventually } from '../helpers/wait.ts';

const skip = natsSkipReason();
const password = 'pw-0f1e2d3c4b5a';
const token = 'tok-9a8b7c6d5e4f';

describe.skipIf(skip !== undefined)(
  `signing in to NATS${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    let dir: string;
    let secured: NatsServer;
    let defaultUser: NatsServer;
    let tokenOnly: NatsServer;
    let operatorMode: NatsServer;
    let credsFile: string;
    let seedFile: string;
    const links: NatsLink[] = [];

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'sync-host-nats-options-'));
      const user = nkeys.createUser();
      seedFile = join(dir, 'relay.nk');
      writeFileSync(seedFile, `${new TextDecoder().decode(user.getSeed())}\n`);
      const users = `users = [ { user: "relay", password: "${password}" }, { nkey: "${user.getPublicKey()}" } ]`;
      const securedConf = join(dir, 'secured.conf');
      writeFileSync(securedConf, `authorization { ${users} }\n`);
      // authorization required, but a client without credentials becomes "relay"
      const defaultConf = join(dir, 'default-user.conf');
      writeFileSync(defaultConf, `authorization { ${users} }\nno_auth_user: relay\n`);
      const tokenConf = join(dir, 'token.conf');
      writeFileSync(tokenConf, `authorization { token: "${token}" }\n`);
      const operator = natsOperatorSetup();
      const operatorConf = join(dir, 'operator.conf');
      writeFileSync(operatorConf, `${operator.serverConfig}\n`);
      credsFile = join(dir, 'relay.creds');
      writeFileSync(credsFile, operator.creds);
      [secured, defaultUser, tokenOnly, operatorMode] = await Promise.all([
        startNatsServer(securedConf),
        startNatsServer(defaultConf),
        startNatsServer(tokenConf),
        startNatsServer(operatorConf),
      ]);
    }, 60_000);

    afterAll(async () => {
      for (const link of links) await link.close();
      await secured?.dispose();
      await defaultUser?.dispose();
      await tokenOnly?.dispose();
      await operatorMode?.dispose();
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    });

    function link(server: NatsServer, access: Parameters<typeof openNatsLink>[3]) {
      const { logger, lines } = captureLogger('debug');
      const opened = openNatsLink([server.url], 'test', logger, access);
      links.push(opened);
      return { link: opened, lines };
    }

    it('signs in with an nkey seed file, and finds that anonymous clients are refused', async () => {
      const { link: nkey, lines } = link(secured, { clusterNkeyFile: seedFile });
      await eventually(() => nkey.connected || undefined, 'connected with the nkey', 10_000);
      const nc = nkey.connection;
      if (nc === undefined) throw new Error('no connection');
      expect(await acceptsAnonymous(nc, {})).toBe(false);
      expect(lines.join('\n')).not.toContain('without credentials');
    });

    it('signs in with a token or a .creds file (a JWT account), and finds anonymous clients refused', async () => {
      const ways = [
        { server: tokenOnly, access: { clusterToken: token } },
        { server: operatorMode, access: { clusterCredsFile: credsFile } },
      ];
      for (const { server, access } of ways) {
        const { link: signed, lines } = link(server, access);
        await eventually(() => signed.connected || undefined, Object.keys(access)[0] ?? '', 10_000);
        const nc = signed.connection;
        if (nc === undefined) throw new Error('no connection');
        expect(await acceptsAnonymous(nc, {})).toBe(false);
        expect(lines.join('\n')).not.toContain(token);
      }
    });

    it('says once that NATS refused a wrong password, and never logs the password', async () => {
      const wrong = `${password}-wrong`;
      const { link: refused, lines } = link(secured, {
        clusterUser: 'relay',
        clusterPassword: wrong,
      });
      await eventually(
        () => lines.filter((l) => l.includes('NATS refused the connection')).length || undefined,
        'the refusal said',
        10_000,
      );
      await eventually(
        () => (lines.filter((l) => l.includes('not reachable yet')).length > 1 ? true : undefined),
        'a few more attempts',
        10_000,
      );
      expect(refused.connected).toBe(false);
      expect(lines.filter((l) => l.includes('NATS refused the connection'))).toHaveLength(1);
      expect(lines.filter((l) => l.includes(wrong) || l.includes(password))).toEqual([]);
    });

    it('finds a server that lets clients without credentials in as a default user', async () => {
      const { link: signed, lines } = link(defaultUser, {
        clusterUser: 'relay',
        clusterPassword: password,
      });
      await eventually(() => signed.connected || undefined, 'connected', 10_000);
      const nc = signed.connection;
      if (nc === undefined) throw new Error('no connection');
      expect(await acceptsAnonymous(nc, {})).toBe(true);
      await eventually(
        () => lines.some((l) => l.includes('lets in clients without credentials')) || undefined,
        'the warning',
        10_000,
      );
    });
  },
);
