import type { AdminOverview } from '../server/admin/types.ts';
import { AdminApiError } from './admin-call.ts';
import { type AdminApi, createAdminApi } from './api.ts';
import { connectionView } from './connection-view.ts';
import { byId, replaceKeepingFocus } from './dom.ts';
import { createPairingsPanel, normalizePairCode, type PairingActions } from './pairings-view.ts';
import { type StorageActions, storageView } from './storage-view.ts';
import { forgetToken, resolveToken, storeToken } from './token.ts';
import { usersView } from './users-view.ts';
import { devicesView, pendingView, projectsView, relayView, type ViewActions } from './views.ts';
import { updateTimes } from './widgets.ts';

/** How often the page asks for fresh data (new magic links, devices connecting). */
const pollIntervalMs = 2_000;

const live = byId('live');
const alertBox = byId('alert');
const main = byId('main');
const tokenForm = byId<HTMLFormElement>('token-form');

/** The pairing code of `#pair=<code>` (the approve URL a pairing device shows), if any. */
function pairFromHash(): string | undefined {
  const code = new URLSearchParams(location.hash.slice(1)).get('pair');
  return code === null ? undefined : (normalizePairCode(code) ?? code);
}

/** Read before the token is taken out of the address bar. */
let wantedPair = pairFromHash();

/** A status line: a success in green, an error in red (`kind`), '' clears it. */
function say(id: string, text: string, kind: 'ok' | 'error' = 'ok'): void {
  const el = byId(id);
  el.textContent = text;
  el.classList.toggle('error-text', kind === 'error');
}

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

/**
 * The page's state between two polls, shared by its parts: what each section last showed, the
 * users being edited, the latest overview, and the poll's timer.
 */
interface Page {
  api: AdminApi;
  seen: Map<string, string>;
  editingUsers: Set<number>;
  latest: AdminOverview | undefined;
  /** A section named in the URL (`#pairings`, what the tray opens) is scrolled to on first data. */
  sectionShown: boolean;
  /** The `#pair=` code already scrolled to (or reported missing), so it happens once. */
  shownPair: string | undefined;
  timer: ReturnType<typeof setTimeout> | undefined;
  stopped: boolean;
  /** The first project the storage section shows (it lists one page of them). */
  storageOffset: number;
  /** Asks for the overview and draws what changed. */
  refresh(): Promise<void>;
}

function start(api: AdminApi): void {
  const page: Page = {
    api,
    seen: new Map(),
    editingUsers: new Set(),
    latest: undefined,
    sectionShown: false,
    shownPair: undefined,
    timer: undefined,
    stopped: false,
    storageOffset: 0,
    refresh: () => refreshPage(page, render),
  };
  const actions = viewActions(page);
  const pairings = createPairingsPanel(
    document.querySelector('#pairings .body') ?? main,
    pairingActions(page),
  );
  const storageActions = storageActionsOf(page);
  const render = (data: AdminOverview) =>
    renderOverview(page, data, { actions, pairings, storageActions });

  const loop = async () => {
    await page.refresh();
    if (!page.stopped) page.timer = setTimeout(() => void loop(), pollIntervalMs);
  };
  window.addEventListener('hashchange', () => {
    const code = pairFromHash();
    if (code === undefined) return;
    wantedPair = code;
    page.shownPair = undefined;
    if (page.latest) render(page.latest);
  });
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible' && !page.stopped) {
      clearTimeout(page.timer);
      void loop();
    }
  });
  listenForInvites(page);
  void loop();
}

/** Runs an admin request; its failure shown above the page (and thrown); the page refreshed after. */
async function act(page: Page, what: () => Promise<unknown>, failure: string): Promise<void> {
  try {
    await what();
    showAlert('');
  } catch (err: unknown) {
    showAlert(`${failure}: ${err instanceof Error ? err.message : String(err)}`);
    throw err;
  } finally {
    await page.refresh();
  }
}

const failureOf = (err: unknown) =>
  err instanceof Error ? err.message : 'the request failed (see the host log)';

/** What the users, devices and projects sections do, each removal confirmed first. */
function viewActions(page: Page): ViewActions {
  const { api, editingUsers, seen } = page;
  const refresh = () => page.refresh();
  return {
    async setSubscription(user, tier, expiresAt) {
      await act(
        page,
        () => api.setSubscription(user.id, tier, expiresAt),
        `Could not change the tier of ${user.email}`,
      );
      say(
        'users-status',
        `Saved: ${user.email} is now ${tier}${expiresAt ? ` until ${expiresAt.slice(0, 10)}` : ''}.`,
      );
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
        await act(page, () => api.deleteUser(user.id), `Could not delete ${user.email}`).catch(
          () => {},
        );
    },
    async revokeDevice(device) {
      const ok = await confirmAction(
        `Revoke “${device.deviceName}”?`,
        `The device of ${device.email} is signed out at once and disconnected from the relay. It can sign in again with a new login link.`,
        'Revoke device',
      );
      if (ok)
        await act(
          page,
          () => api.revokeDevice(device.id),
          `Could not revoke ${device.deviceName}`,
        ).catch(() => {});
    },
    async removeProject(project) {
      const ok = await confirmAction(
        `Remove “${project.name}”?`,
        `The project of ${project.email} stops syncing; the files on the devices stay. The client can register it again.`,
        'Remove project',
      );
      if (ok)
        await act(
          page,
          () => api.removeProject(project.id),
          `Could not remove ${project.name}`,
        ).catch(() => {});
    },
    async removeMember(project, member) {
      const ok = await confirmAction(
        `Remove ${member.email} from “${project.name}”?`,
        `${member.email} stops syncing this project of ${project.email} at once; the files on their devices stay.`,
        'Remove member',
      );
      if (ok)
        await act(
          page,
          () => api.removeMember(project.id, member.userId),
          `Could not remove ${member.email}`,
        ).catch(() => {});
    },
    editing(userId, dirty) {
      if (dirty) editingUsers.add(userId);
      else editingUsers.delete(userId);
    },
  };
}

/** Approve and deny on a pairing card, each with its line under the pairings. */
function pairingActions(page: Page): PairingActions {
  const { api } = page;
  const refresh = () => page.refresh();
  const failure = failureOf;
  return {
    async approve(pairing, email) {
      try {
        const { device, user } = await api.approvePairing(pairing.code, email);
        say(
          'pairings-status',
          `Approved ${pairing.code}: “${device.deviceName}” is now a device of ${user.email}; it signs in by itself within a few seconds.`,
        );
      } catch (err: unknown) {
        say('pairings-status', `Could not approve ${pairing.code}: ${failure(err)}`, 'error');
        throw err;
      } finally {
        await refresh();
      }
    },
    async deny(pairing) {
      try {
        await api.denyPairing(pairing.code);
        say('pairings-status', `Denied ${pairing.code}: “${pairing.deviceName}” was not added.`);
      } catch (err: unknown) {
        say('pairings-status', `Could not deny ${pairing.code}: ${failure(err)}`, 'error');
        throw err;
      } finally {
        await refresh();
      }
    },
  };
}

/** The storage section's pages and a folder report's names, asked when shown. */
function storageActionsOf(page: Page): StorageActions {
  return {
    names: async (room, doc) => (await page.api.reportNames(room, doc)).names,
    page(offset) {
      page.storageOffset = offset;
      void page.refresh();
    },
  };
}

/** Marks and scrolls to the pairing of `#pair=` once it is known whether it is waiting. */
function showWantedPair(page: Page, card: HTMLElement | null): void {
  if (wantedPair === undefined || page.shownPair === wantedPair) return;
  page.shownPair = wantedPair;
  if (card) {
    card.scrollIntoView({ block: 'center' });
    card.querySelector('select')?.focus({ preventScroll: true });
    return;
  }
  say(
    'pairings-status',
    `No device with the code ${wantedPair} is waiting: it was approved, denied or has expired. Start the pairing again on the device.`,
    'error',
  );
  byId('pairings').scrollIntoView();
}

/** Every section drawn again where its data changed, and the counts in the navigation. */
function renderOverview(
  page: Page,
  data: AdminOverview,
  parts: {
    actions: ViewActions;
    pairings: ReturnType<typeof createPairingsPanel>;
    storageActions: StorageActions;
  },
): void {
  const { actions, pairings, storageActions } = parts;
  const { editingUsers } = page;
  /** Renders a section when its data changed (and, for users, when no row is being edited). */
  const section = (id: string, data: unknown, view: () => Node, hold = false) => {
    const key = JSON.stringify(data);
    if (page.seen.get(id) === key || hold) return;
    page.seen.set(id, key);
    const body = document.querySelector(`#${id} .body`);
    if (body) replaceKeepingFocus(body, view());
  };
  const count = (name: string, n: number) => {
    const el = document.querySelector(`[data-count="${name}"]`);
    if (el) el.textContent = n > 0 ? String(n) : '';
  };
  page.latest = data;
  showWantedPair(
    page,
    pairings.render(data.pairings, data.users, data.connection.authUrl, wantedPair),
  );
  section('pending', data.pending, () => pendingView(data.pending));
  section('users', data.users, () => usersView(data.users, actions), editingUsers.size > 0);
  section('devices', data.devices, () => devicesView(data.devices, actions));
  section('projects', data.projects, () => projectsView(data.projects, actions));
  section('relay', [data.relay, data.devices.map((d) => [d.id, d.deviceName])], () =>
    relayView(data.relay, data.devices),
  );
  section('storage', data.storage, () => storageView(data.storage, storageActions));
  section('connection', data.connection, () => connectionView(data.connection));
  count('pairings', data.pairings.length);
  count('pending', data.pending.links.length);
  count('users', data.users.length);
  count('devices', data.devices.length);
  count('projects', data.projects.length);
}

/** One poll: the overview drawn, the live line; a refused token asks for another. */
async function refreshPage(page: Page, render: (data: AdminOverview) => void): Promise<void> {
  if (page.stopped) return;
  try {
    const data = await page.api.overview(page.storageOffset);
    main.hidden = false;
    render(data);
    updateTimes();
    if (!page.sectionShown) {
      page.sectionShown = true;
      // The page was hidden when the browser looked for the fragment's target.
      const target = /^#[a-z]+$/.test(location.hash) ? document.querySelector(location.hash) : null;
      if (target instanceof HTMLElement && wantedPair === undefined) target.scrollIntoView();
    }
    live.className = 'live ok';
    live.textContent = `Live · updated ${new Date().toLocaleTimeString()}`;
    if (alertBox.dataset.kind === 'connection') {
      showAlert('');
      delete alertBox.dataset.kind;
    }
  } catch (err: unknown) {
    live.className = 'live bad';
    if (err instanceof AdminApiError && err.status === 401) {
      page.stopped = true;
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

/** The invite form: creates the account of an address (nothing changes when it exists). */
function listenForInvites(page: Page): void {
  const inviteForm = byId<HTMLFormElement>('invite-form');
  const inviteEmail = byId<HTMLInputElement>('invite-email');
  inviteForm.onsubmit = (event) => {
    event.preventDefault();
    const email = inviteEmail.value.trim().toLowerCase();
    const existed = page.latest?.users.some((u) => u.email === email) ?? false;
    void act(page, () => page.api.invite(email), `Could not invite ${email}`).then(
      () => {
        inviteEmail.value = '';
        say(
          'users-status',
          existed
            ? `${email} already has an account: nothing changed.`
            : `Invited ${email}: the account exists now, so this address can sign in (or be chosen when approving a device).`,
        );
      },
      (err: unknown) =>
        say('users-status', `Could not invite ${email}: ${failureOf(err)}`, 'error'),
    );
  };
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
