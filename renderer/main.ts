import type { AdminOverview } from '../server/admin/types.ts';
import { type AdminApi, ApiError, createAdminApi } from './api.ts';
import { byId, replaceKeepingFocus } from './dom.ts';
import { forgetToken, resolveToken, storeToken } from './token.ts';
import {
  connectionView,
  devicesView,
  pendingView,
  projectsView,
  relayView,
  usersView,
  type ViewActions,
} from './views.ts';

/** How often the page asks for fresh data (new magic links, devices connecting). */
const pollIntervalMs = 2_000;

const live = byId('live');
const alertBox = byId('alert');
const main = byId('main');
const tokenForm = byId<HTMLFormElement>('token-form');

/** Shows an error above the page; '' hides it. */
function showAlert(message: string): void {
  alertBox.textContent = message;
  alertBox.hidden = message === '';
}

/** Asks in a modal dialog; resolves true when confirmed (Escape and Cancel say no). */
function confirmAction(title: string, message: string, confirmLabel: string): Promise<boolean> {
  const dialog = byId<HTMLDialogElement>('confirm');
  byId('confirm-title').textContent = title;
  byId('confirm-message').textContent = message;
  byId('confirm-ok').textContent = confirmLabel;
  const opener = document.activeElement instanceof HTMLElement ? document.activeElement : undefined;
  dialog.returnValue = '';
  dialog.showModal();
  byId('confirm-cancel').focus();
  return new Promise((resolve) => {
    dialog.addEventListener(
      'close',
      () => {
        opener?.focus();
        resolve(dialog.returnValue === 'ok');
      },
      { once: true },
    );
  });
}

function start(api: AdminApi): void {
  const seen = new Map<string, string>();
  const editingUsers = new Set<number>();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;

  /** Renders a section when its data changed (and, for users, when no row is being edited). */
  const section = (id: string, data: unknown, view: () => Node, hold = false) => {
    const key = JSON.stringify(data);
    if (seen.get(id) === key || hold) return;
    seen.set(id, key);
    const body = document.querySelector(`#${id} .body`);
    if (body) replaceKeepingFocus(body, view());
  };
  const count = (name: string, n: number) => {
    const el = document.querySelector(`[data-count="${name}"]`);
    if (el) el.textContent = n > 0 ? String(n) : '';
  };

  const act = async (what: () => Promise<unknown>, failure: string) => {
    try {
      await what();
      showAlert('');
    } catch (err: unknown) {
      showAlert(`${failure}: ${err instanceof Error ? err.message : String(err)}`);
      throw err;
    } finally {
      await refresh();
    }
  };

  const actions: ViewActions = {
    async setSubscription(user, tier, expiresAt) {
      await act(
        () => api.setSubscription(user.id, tier, expiresAt),
        `Could not change the tier of ${user.email}`,
      );
      byId('users-status').textContent =
        `Saved: ${user.email} is now ${tier}${expiresAt ? ` until ${expiresAt.slice(0, 10)}` : ''}.`;
      editingUsers.delete(user.id);
      seen.delete('users');
      await refresh();
    },
    async deleteUser(user) {
      const ok = await confirmAction(
        `Delete ${user.email}?`,
        `Their ${user.deviceCount} device(s) are signed out at once and their ${user.projectCount} project(s) are removed. This cannot be undone.`,
        'Delete user',
      );
      if (ok)
        await act(() => api.deleteUser(user.id), `Could not delete ${user.email}`).catch(() => {});
    },
    async revokeDevice(device) {
      const ok = await confirmAction(
        `Revoke “${device.deviceName}”?`,
        `The device of ${device.email} is signed out at once and disconnected from the relay. It can sign in again with a new login link.`,
        'Revoke device',
      );
      if (ok)
        await act(() => api.revokeDevice(device.id), `Could not revoke ${device.deviceName}`).catch(
          () => {},
        );
    },
    async removeProject(project) {
      const ok = await confirmAction(
        `Remove “${project.name}”?`,
        `The project of ${project.email} stops syncing; the files on the devices stay. The client can register it again.`,
        'Remove project',
      );
      if (ok)
        await act(() => api.removeProject(project.id), `Could not remove ${project.name}`).catch(
          () => {},
        );
    },
    editing(userId, dirty) {
      if (dirty) editingUsers.add(userId);
      else editingUsers.delete(userId);
    },
  };

  function render(data: AdminOverview): void {
    section('pending', data.pending, () => pendingView(data.pending));
    section('users', data.users, () => usersView(data.users, actions), editingUsers.size > 0);
    section('devices', data.devices, () => devicesView(data.devices, actions));
    section('projects', data.projects, () => projectsView(data.projects, actions));
    section('relay', data.relay, () => relayView(data.relay));
    section('connection', data.connection, () => connectionView(data.connection));
    count('pending', data.pending.links.length);
    count('users', data.users.length);
    count('devices', data.devices.length);
    count('projects', data.projects.length);
  }

  async function refresh(): Promise<void> {
    if (stopped) return;
    try {
      const data = await api.overview();
      main.hidden = false;
      render(data);
      live.className = 'live ok';
      live.textContent = `Live · updated ${new Date().toLocaleTimeString()}`;
      if (alertBox.dataset.kind === 'connection') {
        showAlert('');
        delete alertBox.dataset.kind;
      }
    } catch (err: unknown) {
      live.className = 'live bad';
      if (err instanceof ApiError && err.status === 401) {
        stopped = true;
        forgetToken();
        askForToken(
          'The admin token was not accepted (wrong, or the data folder was reset). Paste the current one:',
        );
        return;
      }
      live.textContent = 'Disconnected · retrying';
      alertBox.dataset.kind = 'connection';
      showAlert(err instanceof Error ? err.message : String(err));
    }
  }

  const loop = async () => {
    await refresh();
    if (!stopped) timer = setTimeout(() => void loop(), pollIntervalMs);
  };
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible' && !stopped) {
      clearTimeout(timer);
      void loop();
    }
  });

  const inviteForm = byId<HTMLFormElement>('invite-form');
  const inviteEmail = byId<HTMLInputElement>('invite-email');
  inviteForm.onsubmit = (event) => {
    event.preventDefault();
    const email = inviteEmail.value;
    void act(() => api.invite(email), `Could not invite ${email}`).then(
      () => {
        inviteEmail.value = '';
      },
      () => {},
    );
  };

  void loop();
}

function askForToken(reason?: string): void {
  main.hidden = true;
  tokenForm.hidden = false;
  if (reason) byId('token-reason').textContent = reason;
  const input = byId<HTMLInputElement>('token-input');
  input.focus();
  tokenForm.onsubmit = (event) => {
    event.preventDefault();
    const token = input.value.trim();
    if (token === '') return;
    storeToken(token);
    input.value = '';
    tokenForm.hidden = true;
    showAlert('');
    start(createAdminApi(token));
  };
}

async function boot(): Promise<void> {
  const token = await resolveToken();
  if (token === undefined) {
    live.textContent = 'Not signed in';
    askForToken();
    return;
  }
  start(createAdminApi(token));
}

void boot();
