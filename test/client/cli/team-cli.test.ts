import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCliRunner } from '../../helpers/cli-process.ts';
import { startTestHost, type TestHost } from '../../helpers/host.ts';
import { tempDirMaker } from '../../helpers/temp-dirs.ts';
import { eventually } from '../../helpers/wait.ts';

const { spawnCli, cli, killAll } = createCliRunner();
const tempDir = tempDirMaker('team-cli-');

/** A file's text once it exists with `text`; the sync processes write it in their own time. */
const fileWith = (path: string, text: string) =>
  eventually(
    () => (existsSync(path) && readFileSync(path, 'utf8') === text ? true : undefined),
    `${path} holding "${text}"`,
    30_000,
  );

describe('sync-host project share|members|unshare|leave, and a shared project synced', {
  timeout: 120_000,
}, () => {
  let th: TestHost;
  const config = { owner: '', member: '', other: '' };
  beforeAll(async () => {
    th = await startTestHost({ ui: false });
    for (const who of ['owner', 'member', 'other'] as const) {
      const signed = await th.signIn(`${who}@example.org`, `${who} laptop`);
      if (who !== 'member') {
        const set = await th.admin('PUT', `/users/${signed.userId}/subscription`, {
          tier: 'team',
          expiresAt: null,
        });
        expect(set.status).toBe(200);
      }
      config[who] = tempDir();
      const login = await cli(
        ['login', '--auth', th.base, '--token', signed.deviceToken],
        config[who],
      );
      expect(login.code, login.stderr).toBe(0);
    }
  });
  afterAll(async () => {
    killAll();
    await th?.close();
  });

  const json = (text: string) => JSON.parse(text) as Record<string, unknown>;

  it('shares, lists members, names an ambiguous key as <owner-email>/<key>, unshares and leaves', async () => {
    expect((await cli(['project', 'add', 'notes', 'Notes'], config.owner)).code).toBe(0);
    const shared = await cli(['project', 'share', 'notes', 'member@example.org'], config.owner);
    expect(shared.code, shared.stderr).toBe(0);
    expect(json(shared.stdout)).toMatchObject({ email: 'member@example.org', role: 'editor' });
    const members = await cli(['project', 'members', 'notes'], config.member);
    expect(members.code, members.stderr).toBe(0);
    expect(json(members.stdout)).toMatchObject({
      owner: { email: 'owner@example.org' },
      members: [{ email: 'member@example.org', role: 'editor' }],
    });

    // a second "notes", of another owner: the key alone is ambiguous for the member
    expect((await cli(['project', 'add', 'notes', 'Other notes'], config.other)).code).toBe(0);
    const viewer = await cli(
      ['project', 'share', 'notes', 'member@example.org', '--viewer'],
      config.other,
    );
    expect(json(viewer.stdout)).toMatchObject({ role: 'viewer' });
    const ambiguous = await cli(['project', 'members', 'notes'], config.member);
    expect(ambiguous.code).not.toBe(0);
    expect(ambiguous.stderr).toMatch(/owner@example\.org\/notes.*other@example\.org\/notes/);
    const named = await cli(['project', 'members', 'other@example.org/notes'], config.member);
    expect(named.code, named.stderr).toBe(0);
    expect(json(named.stdout)).toMatchObject({ owner: { email: 'other@example.org' } });

    // a member cannot share, and cannot remove the project
    const byMember = await cli(
      ['project', 'share', 'owner@example.org/notes', 'x@example.org'],
      config.member,
    );
    expect(byMember.code).not.toBe(0);
    expect(byMember.stderr).toMatch(/forbidden|owner/);
    const removeByMember = await cli(
      ['project', 'remove', 'other@example.org/notes'],
      config.member,
    );
    expect(removeByMember.code).not.toBe(0);
    expect(removeByMember.stderr).toMatch(/project leave/);

    const left = await cli(['project', 'leave', 'other@example.org/notes'], config.member);
    expect(left.code, left.stderr).toBe(0);
    const listed = await cli(['projects'], config.member);
    expect(
      (JSON.parse(listed.stdout) as Array<{ owner: { email: string } }>).map((p) => p.owner.email),
    ).toEqual(['owner@example.org']);
    const unshared = await cli(['project', 'unshare', 'notes', 'member@example.org'], config.owner);
    expect(unshared.code, unshared.stderr).toBe(0);
    expect(JSON.parse((await cli(['projects'], config.member)).stdout)).toEqual([]);
  });

  it('keeps one folder in step between the owner and an editor of another account', async () => {
    expect((await cli(['project', 'add', 'shared', 'Shared'], config.owner)).code).toBe(0);
    expect(
      (await cli(['project', 'share', 'shared', 'member@example.org'], config.owner)).code,
    ).toBe(0);
    const folders = { owner: tempDir(), member: tempDir() };
    const owner = spawnCli(['sync', 'shared', folders.owner, '--relay', th.relayUrl], config.owner);
    const member = spawnCli(
      ['sync', 'shared', folders.member, '--relay', th.relayUrl],
      config.member,
    );
    writeFileSync(join(folders.owner, 'from-owner.md'), 'written by the owner\n');
    await fileWith(join(folders.member, 'from-owner.md'), 'written by the owner\n');
    writeFileSync(join(folders.member, 'from-member.md'), 'written by the member\n');
    await fileWith(join(folders.owner, 'from-member.md'), 'written by the member\n');
    // either name of the shared project finds the member's running sync
    for (const name of ['shared', 'owner@example.org/shared']) {
      const status = await cli(['status', name], config.member);
      expect(status.code, status.stderr).toBe(0);
      expect(status.stdout).toContain(folders.member);
    }
    // history names who made each change: the member's e-mail and device name
    owner.child.kill('SIGINT');
    await owner.exited;
    const history = await cli(['history', 'shared'], config.owner);
    expect(history.code, history.stderr).toBe(0);
    const lines = history.stdout.trim().split('\n');
    expect(lines.find((line) => line.endsWith('  from-owner.md'))).toMatch(
      /device \d+ \(owner@example\.org, owner laptop\) {2}created {2}from-owner\.md$/,
    );
    expect(lines.find((line) => line.endsWith('  from-member.md'))).toMatch(
      /device \d+ \(member@example\.org, member laptop\) {2}created {2}from-member\.md$/,
    );
    // the owner deletes the project: the member's sync stops with one line; its files stay
    expect((await cli(['project', 'remove', 'shared'], config.owner)).code).toBe(0);
    const code = await member.exited;
    expect(code).not.toBe(0);
    const said = member.out.stderr.trim().split('\n');
    expect(said.at(-1)).toMatch(
      /"owner@example\.org\/shared" is no longer shared with you.*the files stay/,
    );
    expect(said.filter((line) => line.includes('no longer shared'))).toHaveLength(1);
    expect(readFileSync(join(folders.member, 'from-owner.md'), 'utf8')).toBe(
      'written by the owner\n',
    );
    owner.child.kill('SIGINT');
    await owner.exited;
  });

  it('a viewer receives the folder and its own edits never leave it', async () => {
    expect((await cli(['project', 'add', 'readonly', 'Read only'], config.owner)).code).toBe(0);
    const viewer = await cli(
      ['project', 'share', 'readonly', 'member@example.org', '--viewer'],
      config.owner,
    );
    expect(viewer.code, viewer.stderr).toBe(0);
    const folders = { owner: tempDir(), viewer: tempDir() };
    const owner = spawnCli(
      ['sync', 'readonly', folders.owner, '--relay', th.relayUrl],
      config.owner,
    );
    const reader = spawnCli(
      ['sync', 'readonly', folders.viewer, '--relay', th.relayUrl],
      config.member,
    );
    writeFileSync(join(folders.owner, 'spec.md'), 'the owner’s spec\n');
    await fileWith(join(folders.viewer, 'spec.md'), 'the owner’s spec\n').catch((err: unknown) => {
      throw new Error(
        `${String(err)}\nviewer: ${reader.out.stderr}\n${reader.out.stdout}\nowner: ${owner.out.stderr}`,
      );
    });
    writeFileSync(join(folders.viewer, 'local.md'), 'the viewer’s note\n');
    writeFileSync(join(folders.viewer, 'spec.md'), 'the viewer rewrote it\n');
    writeFileSync(join(folders.owner, 'later.md'), 'after the viewer’s edits\n');
    await fileWith(join(folders.viewer, 'later.md'), 'after the viewer’s edits\n');
    // for a few seconds more, nothing of the viewer's reaches the owner
    const until = Date.now() + 4_000;
    while (Date.now() < until) {
      expect(existsSync(join(folders.owner, 'local.md'))).toBe(false);
      expect(readFileSync(join(folders.owner, 'spec.md'), 'utf8')).toBe('the owner’s spec\n');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(reader.out.stderr).not.toMatch(/forbidden/);
    // the viewer's status lists what stayed here
    const kept = await cli(['status', 'readonly'], config.member);
    expect(kept.code, kept.stderr).toBe(0);
    expect(kept.stdout).toMatch(
      /a viewer of this project: changes made here are not sent \(2\)\n {4}local\.md\n {4}spec\.md/,
    );
    // status names the members' devices present
    const status = await cli(['status', 'readonly'], config.owner);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(
      /other devices online: device \d+ \(member@example\.org, member laptop, viewer\)/,
    );
    owner.child.kill('SIGINT');
    reader.child.kill('SIGINT');
    await Promise.all([owner.exited, reader.exited]);
  });

  it('an encrypted shared project: members with the passphrase sync it; one without reads nothing and costs the others nothing', async () => {
    expect((await cli(['project', 'add', 'secret', 'Secret'], config.owner)).code).toBe(0);
    for (const email of ['member@example.org', 'other@example.org']) {
      expect((await cli(['project', 'share', 'secret', email], config.owner)).code).toBe(0);
    }
    const passphrase = join(tempDir(), 'passphrase');
    writeFileSync(passphrase, 'shared out of band\n', { mode: 0o600 });
    const encrypt = ['--encrypt', '--passphrase-file', passphrase];
    const folders = { owner: tempDir(), member: tempDir(), other: tempDir() };
    const run = (who: 'owner' | 'member' | 'other', extra: string[]) =>
      spawnCli(['sync', 'secret', folders[who], '--relay', th.relayUrl, ...extra], config[who]);
    const syncs = [run('owner', encrypt), run('member', encrypt), run('other', [])];
    writeFileSync(join(folders.owner, 'plan.md'), 'the plan\n');
    await fileWith(join(folders.member, 'plan.md'), 'the plan\n');
    writeFileSync(join(folders.other, 'plan.md'), 'written without the passphrase\n');
    writeFileSync(join(folders.member, 'next.md'), 'after the one without\n');
    await fileWith(join(folders.owner, 'next.md'), 'after the one without\n');
    const until = Date.now() + 3_000;
    while (Date.now() < until) {
      expect(readFileSync(join(folders.owner, 'plan.md'), 'utf8')).toBe('the plan\n');
      expect(readFileSync(join(folders.member, 'plan.md'), 'utf8')).toBe('the plan\n');
      expect(existsSync(join(folders.other, 'next.md'))).toBe(false);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    for (const sync of syncs) sync.child.kill('SIGINT');
    await Promise.all(syncs.map((sync) => sync.exited));
  });
});
