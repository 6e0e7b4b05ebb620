/**
 * The editor example: CodeMirror 6 bound to a Yjs document that the sync-host relay keeps in
 * step across the user's devices, with live cursors. Its settings come from the page's hash:
 * `#relay=ws://host:8443&room=<roomId>&token=<deviceToken>[&doc=<name>][&passphrase=<p>]`
 * (the room id is `sync-host projects`' `roomId`, the token a device token of that user).
 */
import { EditorState } from '@codemirror/state';
import { EditorView } from '@codemirror/view';
import { yCollab } from 'y-codemirror.next';
import { createRelayConnection } from '../../client/relay-connection.ts';
import { deviceTokenIds } from '../../client/settings.ts';
import { createYjsProvider, type YjsProvider } from '../../client/yjs-provider.ts';

const colors = ['#d9480f', '#1971c2', '#2f9e44', '#9c36b5', '#e67700', '#0c8599'];

function setStatus(text: string): void {
  const status = document.getElementById('status');
  if (status !== null) status.textContent = text;
}

async function start(): Promise<YjsProvider> {
  const params = new URLSearchParams(location.hash.slice(1));
  const url = params.get('relay') ?? 'ws://localhost:8443';
  const room = params.get('room') ?? '';
  const token = params.get('token') ?? '';
  const ids = deviceTokenIds(token);
  if (room === '' || ids === undefined) {
    throw new Error('open this page with #relay=…&room=…&token=… (see examples/editor/README.md)');
  }
  const connection = createRelayConnection({ url, room, device: String(ids.deviceId), token });
  const provider = await createYjsProvider({
    connection,
    name: params.get('doc') ?? 'editor',
    passphrase: params.get('passphrase') ?? undefined,
  });
  const color = colors[ids.deviceId % colors.length] ?? '#1971c2';
  provider.awareness.setLocalStateField('user', {
    name: `device ${ids.deviceId}`,
    color,
    colorLight: `${color}33`,
  });
  const text = provider.doc.getText('text');
  const parent = document.getElementById('editor');
  if (parent === null) throw new Error('the page has no #editor');
  new EditorView({
    state: EditorState.create({
      doc: text.toString(),
      extensions: [yCollab(text, provider.awareness)],
    }),
    parent,
  });
  const show = () =>
    setStatus(
      `${provider.synced ? 'in sync' : 'connecting…'} · device ${ids.deviceId} · also here: ${
        provider.peers.map((peer) => `device ${peer}`).join(', ') || 'no other device'
      }${provider.encrypted ? ' · end-to-end encrypted' : ''}`,
    );
  provider.on('synced', show);
  provider.on('peers', show);
  provider.on('error', (error) => setStatus(`problem: ${error.message}`));
  // The provider appends the edits of each 0.3 s together; when the page is hidden or
  // left, what waits goes to the host at once (the page may not come back to send it).
  const sendWaiting = () => void provider.flush().catch(() => undefined);
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'hidden') sendWaiting();
  });
  window.addEventListener('pagehide', sendWaiting);
  await connection.connect();
  show();
  return provider;
}

declare global {
  interface Window {
    /** The running example's provider (for tests and the console). */
    syncExample?: YjsProvider;
  }
}

start().then(
  (provider) => {
    window.syncExample = provider;
  },
  (err: unknown) => setStatus(`problem: ${err instanceof Error ? err.message : String(err)}`),
);
