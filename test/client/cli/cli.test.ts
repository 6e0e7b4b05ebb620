import { readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAuthClient } from '../../../client/auth-client.ts';
import { createCliRunner } from '../../helpers/cli-process.ts';
import { hostDir, type RunningHost, startHostProgram } from '../../helpers/host-process.ts';
import { tempDirMaker } from '../../helpers/temp-dirs.ts';
import { eventually } from '../../helpers/wait.ts';

const dirs: string[] = [];
const { spawnCli, cli, killAll } = createCliRunner();

const tempDir = tempDirMaker('sync-cli-');

let host: RunningHost;
const laptop = tempDir();
const desktop = tempDir();
const email = 'frank@example.org';

beforeAll(async () => {
  const dir = hostDir();
  dirs.push(dir);
  host = await startHostProgram(dir);
});

afterAll(async () => {
  killAll();
  await host?.process.stop('SIGKILL').catch(() => null);
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

// Each command is a fresh `bin/sync-host` process (~2.5 s of start-up on a busy machine).
describe('sync-host client commands', { timeout: 60_000 }, () => {
  it('signs in with the link pasted on standard input and stores the token with mode 0600', async () => {
    const login = spawnCli(
      ['login', email, '--auth', `${host.authUrl}/`, '--device-name', 'laptop'],
      laptop,
    );
    const token = await host.magicToken(email);
    login.child.stdin.end(`${host.authUrl}/auth/verify?token=${token}\n`);
    expect(await login.exited).toBe(0);
    expect(login.out.stdout).toMatch(
      /^Signed in as frank@example\.org on http:\/\/127\.0\.0\.1:\d+: device \d+ "laptop"/,
    );

    const file = join(laptop, 'credentials.json');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const stored = JSON.parse(readFileSync(file, 'utf8')) as {
      hosts: Record<string, { deviceToken: string; email: string }>;
    };
    const credential = stored.hosts[host.authUrl]!;
    expect(credential.email).toBe(email);
    expect(login.out.stdout + login.out.stderr).not.toContain(credential.deviceToken);
    expect(login.out.stdout + login.out.stderr).not.toContain(token);
  });

  it('verifies a token given with --token without requesting a link (JWT flow)', async () => {
    await createAuthClient({ authUrl: host.authUrl }).requestLogin(email, 'jwt');
    const token = await host.magicToken(email);
    const links = () => host.process.stdout.filter((l) => l.includes(email)).length;
    const before = links();
    const res = await cli(
      [
        'login',
        email,
        '--auth',
        host.authUrl,
        '--token',
        token,
        '--jwt',
        '--device-name',
        'desktop',
      ],
      desktop,
    );
    expect(res).toMatchObject({ code: 0, stderr: '' });
    expect(res.stdout).toContain('"desktop"');
    expect(links()).toBe(before);
  });

  it('registers a project idempotently and lists projects, devices and the subscription as JSON', async () => {
    const added = await cli(['project', 'add', 'notes', 'Notes'], laptop);
    expect(added.code).toBe(0);
    const project = JSON.parse(added.stdout) as { id: number; projectKey: string; roomId: string };
    expect(project).toMatchObject({ projectKey: 'notes', name: 'Notes' });

    const [again, projects, devices, subscription] = await Promise.all([
      cli(['project', 'add', 'notes', 'Notes'], desktop),
      cli(['projects', '--auth', host.authUrl], laptop),
      cli(['devices'], desktop),
      cli(['subscription'], laptop),
    ]);
    expect(JSON.parse(again.stdout)).toEqual(project);
    expect(JSON.parse(projects.stdout)).toEqual([
      {
        ...project,
        role: 'owner',
        owner: { userId: expect.any(Number), email: expect.any(String) },
      },
    ]);
    const list = JSON.parse(devices.stdout) as Array<{ deviceName: string }>;
    expect(list.map((d) => d.deviceName)).toEqual(['laptop', 'desktop']);
    expect(JSON.parse(subscription.stdout)).toMatchObject({
      tier: 'pro',
      effectiveTier: 'pro',
      projectLimit: null,
    });
  });

  it('sends one message, and listen prints it, then on resuming prints what was buffered first', async () => {
    let listen = spawnCli(['listen', 'notes'], laptop);
    await eventually(() => listen.out.stderr.includes('joined room'), 'listen joined', 15_000);
    const sent = await cli(['send', 'notes', 'broadcast', '{"edit":1}'], desktop);
    expect(sent).toMatchObject({ code: 0, stdout: '', stderr: '' });
    await eventually(() => listen.out.stdout.includes('\n'), 'a line from listen', 5_000);
    const first = JSON.parse(listen.out.stdout.split('\n')[0]!) as Record<string, unknown>;
    expect(first).toMatchObject({ to: 'broadcast', payload: { edit: 1 } });

    listen.child.kill('SIGTERM');
    expect(await listen.exited).toBe(0);
    for (const edit of [2, 3]) {
      expect(
        (await cli(['send', 'notes', 'broadcast', JSON.stringify({ edit })], desktop)).code,
      ).toBe(0);
    }
    // Alone in the room the sender is the host: "host" is no one.
    const toHost = await cli(['send', 'notes', 'host', '{"edit":4}'], desktop);
    expect(toHost.code).toBe(1);
    expect(toHost.stderr.trim().split('\n')).toEqual([expect.stringContaining('unknown_target')]);

    listen = spawnCli(['listen', 'notes'], laptop);
    await eventually(() => listen.out.stdout.split('\n').length >= 3, 'buffered lines', 15_000);
    expect(listen.out.stderr).toContain('2 buffered');
    const lines = listen.out.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { payload: unknown });
    expect(lines.map((l) => l.payload)).toEqual([{ edit: 2 }, { edit: 3 }]);
    listen.child.kill('SIGTERM');
    expect(await listen.exited).toBe(0);
  }, 60_000);

  it('reports failures as one line with a non-zero exit code', async () => {
    const [notSignedIn, badToken, unknownProject, badJson, badUrl, unquoted] = await Promise.all([
      cli(['devices'], tempDir()),
      cli(['login', email, '--auth', host.authUrl, '--token', 'f'.repeat(64)], tempDir()),
      cli(['send', 'nope', 'broadcast', '{}'], laptop),
      cli(['send', 'notes', 'broadcast', '[1]'], laptop),
      cli(['login', email, '--auth', 'ftp://example.org'], tempDir()),
      // What the shell leaves of {"text":"hi"} typed without quotes.
      cli(['send', 'notes', 'broadcast', '{text:hi}'], laptop),
    ]);
    expect(notSignedIn.code).toBe(1);
    expect(notSignedIn.stderr).toMatch(/^sync-host devices: not signed in: run sync-host login/);
    expect(badToken.code).toBe(1);
    expect(badToken.stderr).toMatch(/invalid_token, HTTP 401/);
    expect(unknownProject.code).toBe(1);
    expect(unknownProject.stderr).toContain('no project with key "nope"');
    expect(badJson.code).toBe(2);
    const example = `an object in single quotes, as '{"text":"hi"}'`;
    expect(badJson.stderr).toContain(`<json> must be a JSON object: ${example}`);
    expect(unquoted.code).toBe(2);
    expect(unquoted.stderr).toContain(`<json> is not valid JSON: ${example}`);
    expect(badUrl.code).toBe(2);
    expect(badUrl.stderr).toContain('--auth must be an http:// or https:// URL');
    for (const res of [notSignedIn, badToken, unknownProject, badJson, badUrl, unquoted]) {
      expect(res.stderr.trim().split('\n')).toHaveLength(1);
      expect(res.stderr).not.toMatch(/\n\s+at /);
    }
  });
});
