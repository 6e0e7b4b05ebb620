import { afterEach, describe, expect, it } from 'vitest';
import { registerProject, startTestHost, type TestHost } from '../helpers/host.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { authCall, listedProject, share, type TeamDevice } from '../helpers/team.ts';
import { eventually } from '../helpers/wait.ts';

const secret = 'team-members-secret-0123456789abcdef01';

/** Revocations reach the relay's connections within this long. */
const revocationDeadlineMs = 5_000;

describe('a co-hosted relay admits a project’s members on their grant', () => {
  let host: TestHost | undefined;
  const clients: RelayClient[] = [];
  afterEach(async () => {
    for (const client of clients.splice(0)) client.terminate();
    await host?.close();
    host = undefined;
  });

  async function team() {
    const h = await startTestHost({ auth: [`AUTH_SECRET=${secret}`], ui: false });
    host = h;
    const owner = await h.signIn('owner-team@example.com', 'owner laptop');
    const editor = await h.signIn('editor@example.com', 'editor laptop');
    const viewer = await h.signIn('viewer@example.com', 'viewer laptop');
    const stranger = await h.signIn('stranger@example.com', 'stranger laptop');
    const tier = await h.admin('PUT', `/users/${owner.userId}/subscription`, {
      tier: 'team',
      expiresAt: null,
    });
    expect(tier.status).toBe(200);
    const project = await registerProject(h.base, owner.deviceToken, 'notes');
    await share(h.base, owner, project.id, 'editor@example.com', 'editor');
    await share(h.base, owner, project.id, 'viewer@example.com', 'viewer');
    return { h, owner, editor, viewer, stranger, project };
  }

  const connect = () => {
    const client = new RelayClient(host?.relayUrl ?? '');
    clients.push(client);
    return client;
  };

  async function joinAs(device: TeamDevice, room: string, grant: string | undefined) {
    const client = connect();
    const answer = await client.joinWithGrant(room, device.deviceId, device.deviceToken, grant);
    return { client, answer };
  }

  async function refused(device: TeamDevice, room: string, grant: string | undefined) {
    const { client, answer } = await joinAs(device, room, grant);
    expect(answer).toMatchObject({ type: 'error', code: 'auth_failed' });
    expect((await client.waitClosed()).code).toBe(4001);
  }

  it('admits the members with their own token and grant, and nobody else', async () => {
    const { h, owner, editor, viewer, stranger, project } = await team();
    const room = project.roomId;
    const editorGrant = (await listedProject(h.base, editor, project.id)).grant;
    const viewerGrant = (await listedProject(h.base, viewer, project.id)).grant;
    expect((await joinAs(owner, room, undefined)).answer).toMatchObject({ type: 'joined' });
    expect((await joinAs(editor, room, editorGrant)).answer).toMatchObject({ type: 'joined' });
    expect((await joinAs(viewer, room, viewerGrant)).answer).toMatchObject({ type: 'joined' });
    // no grant; another member's grant; a grant of this user for another room
    await refused(stranger, room, undefined);
    await refused(stranger, room, editorGrant);
    await refused(editor, room, viewerGrant);
    const strangerTier = await h.admin('PUT', `/users/${stranger.userId}/subscription`, {
      tier: 'team',
      expiresAt: null,
    });
    expect(strangerTier.status).toBe(200);
    const other = await registerProject(h.base, stranger.deviceToken, 'other');
    await refused(editor, other.roomId, editorGrant);
    // a grant whose role was rewritten is not signed
    await refused(viewer, room, viewerGrant?.replace('.viewer.', '.editor.'));
  });

  it('closes a removed member’s connections with 4003 within 5 s and refuses its grant after', async () => {
    const { h, owner, editor, viewer, project } = await team();
    const room = project.roomId;
    const editorGrant = (await listedProject(h.base, editor, project.id)).grant;
    const viewerGrant = (await listedProject(h.base, viewer, project.id)).grant;
    const ownerSide = await joinAs(owner, room, undefined);
    const editorSide = await joinAs(editor, room, editorGrant);
    const viewerSide = await joinAs(viewer, room, viewerGrant);
    expect(editorSide.answer).toMatchObject({ type: 'joined' });
    const removed = await authCall(
      h.base,
      owner.deviceToken,
      'DELETE',
      `/auth/project/${project.id}/members/${editor.userId}`,
    );
    expect(removed.status).toBe(204);
    expect((await editorSide.client.waitClosed(revocationDeadlineMs)).code).toBe(4003);
    await refused(editor, room, editorGrant);
    // the others stay
    await ownerSide.client.sync();
    await viewerSide.client.sync();
    expect(ownerSide.client.socket.readyState).toBe(ownerSide.client.socket.OPEN);
    expect(viewerSide.client.socket.readyState).toBe(viewerSide.client.socket.OPEN);
    // shared again: a new membership, a new grant that works; the old one stays refused
    await share(h.base, owner, project.id, 'editor@example.com', 'editor');
    const again = (await listedProject(h.base, editor, project.id)).grant;
    expect(again).not.toBe(editorGrant);
    expect((await joinAs(editor, room, again)).answer).toMatchObject({ type: 'joined' });
    await refused(editor, room, editorGrant);
  });

  it('a role change closes the old grant’s connections; the new grant joins', async () => {
    const { h, owner, editor, project } = await team();
    const before = (await listedProject(h.base, editor, project.id)).grant;
    const side = await joinAs(editor, project.roomId, before);
    expect(side.answer).toMatchObject({ type: 'joined' });
    const changed = await authCall(
      h.base,
      owner.deviceToken,
      'PATCH',
      `/auth/project/${project.id}/members/${editor.userId}`,
      { role: 'viewer' },
    );
    expect(changed.status).toBe(200);
    expect((await side.client.waitClosed(revocationDeadlineMs)).code).toBe(4003);
    const after = await listedProject(h.base, editor, project.id);
    expect(after.role).toBe('viewer');
    await refused(editor, project.roomId, before);
    expect((await joinAs(editor, project.roomId, after.grant)).answer).toMatchObject({
      type: 'joined',
    });
  });

  it('closes the members’ connections when the project or the member’s user is deleted', async () => {
    const { h, owner, editor, viewer, project } = await team();
    const editorGrant = (await listedProject(h.base, editor, project.id)).grant;
    const viewerGrant = (await listedProject(h.base, viewer, project.id)).grant;
    const editorSide = await joinAs(editor, project.roomId, editorGrant);
    const viewerSide = await joinAs(viewer, project.roomId, viewerGrant);
    const deleted = await h.admin('DELETE', `/users/${viewer.userId}`);
    expect(deleted.status).toBe(204);
    expect((await viewerSide.client.waitClosed(revocationDeadlineMs)).code).toBe(4003);
    await editorSide.client.sync();
    expect(editorSide.client.socket.readyState).toBe(editorSide.client.socket.OPEN);
    const gone = await authCall(h.base, owner.deviceToken, 'DELETE', `/auth/project/${project.id}`);
    expect(gone.status).toBe(204);
    expect((await editorSide.client.waitClosed(revocationDeadlineMs)).code).toBe(4003);
    await refused(editor, project.roomId, editorGrant);
  });

  it('refuses a viewer’s appends and chunk puts with forbidden, lets it read, and tells roles in joined and presence', async () => {
    const { h, owner, editor, viewer, project } = await team();
    const room = project.roomId;
    const ownerSide = await joinAs(owner, room, undefined);
    const editorSide = await joinAs(
      editor,
      room,
      (await listedProject(h.base, editor, project.id)).grant,
    );
    expect(editorSide.answer).toMatchObject({
      roles: { [owner.deviceId]: 'owner', [editor.deviceId]: 'editor' },
    });
    expect(await ownerSide.client.next('presence')).toMatchObject({
      device: editor.deviceId,
      state: 'joined',
      role: 'editor',
    });
    const viewerSide = await joinAs(
      viewer,
      room,
      (await listedProject(h.base, viewer, project.id)).grant,
    );
    expect(viewerSide.answer).toMatchObject({
      roles: {
        [owner.deviceId]: 'owner',
        [editor.deviceId]: 'editor',
        [viewer.deviceId]: 'viewer',
      },
    });
    expect(await editorSide.client.next('presence')).toMatchObject({ role: 'viewer' });
    const data = Buffer.from('written by the editor').toString('base64');
    editorSide.client.send({ type: 'append', doc: 'notes.md', ref: 1, data });
    expect(await editorSide.client.next('appended')).toMatchObject({
      doc: 'notes.md',
      ref: 1,
      pos: 1,
    });

    viewerSide.client.send({ type: 'append', doc: 'notes.md', ref: 7, data });
    expect(await viewerSide.client.next('error')).toMatchObject({
      code: 'forbidden',
      doc: 'notes.md',
      ref: 7,
    });
    const id = `h${'A'.repeat(43)}`;
    viewerSide.client.send({ type: 'chunk-put', ref: 8, id, data });
    expect(await viewerSide.client.next('error')).toMatchObject({ code: 'forbidden', ref: 8, id });
    // a folder report of a viewer is not kept (it would stand for the owner's folder); an
    // editor's is
    const report = (names: string[]) => ({
      type: 'folder-report',
      doc: 'folder',
      files: names.length,
      bytes: 10,
      encrypted: false,
      names,
    });
    editorSide.client.send(report(['from-the-editor.md']));
    await editorSide.client.sync();
    viewerSide.client.send(report(['from-the-viewer.md']));
    await viewerSide.client.sync();
    const names = await h.admin(
      'GET',
      `/storage/names?room=${encodeURIComponent(room)}&doc=folder`,
    );
    expect(names.body).toEqual({ names: ['from-the-editor.md'] });
    // its routed messages reach the others marked as a viewer's; the editor's are not marked
    viewerSide.client.send({ to: 'broadcast', payload: { update: 'from the viewer' } });
    editorSide.client.send({ to: 'broadcast', payload: { update: 'from the editor' } });
    const fromViewer = await eventually(
      () => ownerSide.client.allMessages().find((m) => m.from === viewer.deviceId),
      'the viewer’s broadcast at the owner',
    );
    expect(fromViewer).toMatchObject({ role: 'viewer', payload: { update: 'from the viewer' } });
    const fromEditor = await eventually(
      () => viewerSide.client.allMessages().find((m) => m.from === editor.deviceId),
      'the editor’s broadcast at the viewer',
    );
    expect(fromEditor).not.toHaveProperty('role');
    // what it reads is what the editor wrote, and nothing of its own
    viewerSide.client.send({ type: 'catchup', doc: 'notes.md', after: 0 });
    expect(await viewerSide.client.next('caughtup')).toMatchObject({ doc: 'notes.md', pos: 1 });
    const pages = viewerSide.client.frames.filter((frame) => frame.type === 'stored');
    expect(pages.flatMap((page) => (page as { entries: unknown[] }).entries)).toHaveLength(1);
  });
});
