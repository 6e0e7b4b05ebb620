import { projectLimits, type Tier, tiers } from '../protocol/tiers.ts';
import type {
  AdminDevice,
  AdminPendingLinks,
  AdminProject,
  AdminRelay,
  AdminRoom,
  AdminUser,
} from '../server/admin/types.ts';
import { h } from './dom.ts';
import { dateInputValue, expiryFromDateInput } from './format.ts';
import { copyButton, empty, scrollingTable, time } from './widgets.ts';

/** What the views ask the page to do; each resolves once done (or rejects with the error). */
export interface ViewActions {
  setSubscription(user: AdminUser, tier: string, expiresAt: string | null): Promise<void>;
  deleteUser(user: AdminUser): Promise<void>;
  revokeDevice(device: AdminDevice): Promise<void>;
  removeProject(project: AdminProject): Promise<void>;
  /** Marks a user's row as being edited (the page holds back refreshes of the table meanwhile). */
  editing(userId: number, dirty: boolean): void;
}

/** "up to 1 project", "unlimited projects": what a tier allows, shown beside its selector. */
export function tierLimitText(tier: Tier): string {
  const limit = projectLimits[tier];
  if (limit === null) return 'unlimited projects';
  if (limit === 0) return 'no synced projects';
  return `up to ${limit} project${limit === 1 ? '' : 's'}`;
}

export function pendingView(pending: AdminPendingLinks): Node {
  if (!pending.devMode) {
    return empty(
      'E-mail is configured (SMTP): login links go out by e-mail and are not shown here.',
    );
  }
  if (pending.links.length === 0) {
    return empty(
      'No pending sign-ins. When someone asks for a login link, it appears here within a few seconds (development mode: no SMTP).',
    );
  }
  return scrollingTable(
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        h('th', {}, 'E-mail'),
        h('th', {}, 'Requested'),
        h('th', {}, 'Expires'),
        h('th', {}, 'Link'),
        h('th', {}, ''),
      ),
    ),
    h(
      'tbody',
      {},
      ...pending.links.map((link, i) =>
        h(
          'tr',
          { 'data-email': link.email },
          h('td', { class: 'email' }, link.email),
          h('td', {}, time(link.createdAt)),
          h('td', {}, time(link.expiresAt)),
          h('td', {}, h('span', { class: 'mono truncate', title: link.link }, link.link)),
          h(
            'td',
            {},
            h(
              'div',
              { class: 'row-actions' },
              copyButton(link.link, 'Copy link', `pending-copy-${i}-${link.email}`),
              h(
                'a',
                {
                  class: 'button',
                  href: link.link,
                  target: '_blank',
                  rel: 'noopener noreferrer',
                  'data-key': `pending-open-${link.email}`,
                },
                'Open',
              ),
            ),
          ),
        ),
      ),
    ),
  );
}

function userRow(user: AdminUser, actions: ViewActions): HTMLElement {
  const select = h(
    'select',
    { 'aria-label': `Tier of ${user.email}`, 'data-key': `tier-${user.id}`, name: 'tier' },
    ...tiers.map((t) => h('option', { value: t, selected: t === user.tier }, t)),
  );
  const limit = h('span', { class: 'tier-limit hint' }, tierLimitText(user.tier));
  const expiry = h('input', {
    type: 'date',
    'aria-label': `Expiry of ${user.email} (empty: never)`,
    'data-key': `expiry-${user.id}`,
    name: 'expiresAt',
    value: dateInputValue(user.expiresAt),
  });
  const message = h('span', { class: 'status-text', role: 'status' });
  const save = h(
    'button',
    { type: 'submit', disabled: true, 'data-key': `save-${user.id}` },
    'Save',
  );
  const dirty = () => select.value !== user.tier || expiry.value !== dateInputValue(user.expiresAt);
  const onEdit = () => {
    limit.textContent = tierLimitText(select.value as Tier);
    save.disabled = !dirty();
    actions.editing(user.id, dirty());
  };
  select.addEventListener('change', onEdit);
  expiry.addEventListener('input', onEdit);
  const form = h(
    'form',
    {
      class: 'row-actions',
      'aria-label': `Subscription of ${user.email}`,
      onSubmit: (event: Event) => {
        event.preventDefault();
        save.disabled = true;
        message.textContent = 'Saving…';
        actions.setSubscription(user, select.value, expiryFromDateInput(expiry.value)).then(
          () => {
            message.textContent = '';
          },
          (err: unknown) => {
            message.textContent = err instanceof Error ? err.message : 'Could not save';
            save.disabled = false;
          },
        );
      },
    },
    select,
    limit,
    expiry,
    save,
    message,
  );
  const expired = user.effectiveTier !== user.tier;
  return h(
    'tr',
    { 'data-user': user.email },
    h(
      'td',
      { class: 'email' },
      user.email,
      user.owner
        ? h(
            'span',
            {
              class: 'badge owner',
              title: 'The owner of this host: the first user, or OWNER_EMAIL. Starts on tier pro.',
            },
            'owner',
          )
        : null,
    ),
    h(
      'td',
      {},
      form,
      expired
        ? h(
            'span',
            { class: 'badge warn', title: 'The expiry date has passed' },
            'expired: counts as free',
          )
        : null,
    ),
    h('td', { class: 'num' }, user.deviceCount),
    h('td', { class: 'num' }, user.projectCount),
    h('td', {}, time(user.createdAt)),
    h(
      'td',
      {},
      h(
        'button',
        {
          type: 'button',
          class: 'danger',
          'data-key': `delete-user-${user.id}`,
          onClick: () => {
            void actions.deleteUser(user);
          },
        },
        'Delete',
      ),
    ),
  );
}

export function usersView(users: AdminUser[], actions: ViewActions): Node {
  if (users.length === 0)
    return empty('No users yet. Users appear after their first sign-in, or invite one above.');
  return scrollingTable(
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        h('th', {}, 'E-mail'),
        h('th', {}, 'Tier and expiry (UTC)'),
        h('th', { class: 'num' }, 'Devices'),
        h('th', { class: 'num' }, 'Projects'),
        h('th', {}, 'Joined'),
        h('th', {}, ''),
      ),
    ),
    h('tbody', {}, ...users.map((u) => userRow(u, actions))),
  );
}

export function devicesView(devices: AdminDevice[], actions: ViewActions): Node {
  if (devices.length === 0)
    return empty('No devices yet. A device appears when someone signs in from a client.');
  return scrollingTable(
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        h('th', {}, 'Device'),
        h('th', {}, 'Platform'),
        h('th', {}, 'User'),
        h('th', {}, 'Relay'),
        h('th', {}, 'Last seen'),
        h('th', {}, ''),
      ),
    ),
    h(
      'tbody',
      {},
      ...devices.map((d) =>
        h(
          'tr',
          { 'data-device': String(d.id) },
          h('td', {}, d.deviceName, ' ', h('span', { class: 'muted' }, `#${d.id}`)),
          h('td', {}, d.platform),
          h('td', { class: 'email' }, d.email),
          h(
            'td',
            {},
            d.connected
              ? h('span', { class: 'badge on' }, 'connected')
              : h('span', { class: 'muted' }, 'offline'),
          ),
          h('td', {}, time(d.lastSeen)),
          h(
            'td',
            {},
            h(
              'button',
              {
                type: 'button',
                class: 'danger',
                'data-key': `revoke-${d.id}`,
                onClick: () => {
                  void actions.revokeDevice(d);
                },
              },
              'Revoke',
            ),
          ),
        ),
      ),
    ),
  );
}

export function projectsView(projects: AdminProject[], actions: ViewActions): Node {
  if (projects.length === 0) {
    return empty(
      'No synced projects. A client registers a project when its user turns sync on (needs tier personal or above).',
    );
  }
  return scrollingTable(
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        h('th', {}, 'Name'),
        h('th', {}, 'Key'),
        h('th', {}, 'User'),
        h('th', {}, 'Room'),
        h('th', {}, 'Created'),
        h('th', {}, ''),
      ),
    ),
    h(
      'tbody',
      {},
      ...projects.map((p) =>
        h(
          'tr',
          { 'data-project': String(p.id) },
          h('td', {}, p.name),
          h('td', {}, h('span', { class: 'mono truncate', title: p.projectKey }, p.projectKey)),
          h('td', { class: 'email' }, p.email),
          h('td', {}, h('span', { class: 'mono truncate', title: p.roomId }, p.roomId)),
          h('td', {}, time(p.createdAt)),
          h(
            'td',
            {},
            h(
              'button',
              {
                type: 'button',
                class: 'danger',
                'data-key': `remove-project-${p.id}`,
                onClick: () => {
                  void actions.removeProject(p);
                },
              },
              'Remove',
            ),
          ),
        ),
      ),
    ),
  );
}

/** A room's project (name, then key) over its room id in small print; the id alone when unknown. */
function roomProject(room: AdminRoom): Node {
  const id = h(
    'span',
    { class: 'mono truncate hint room-id', title: `Room ${room.room}` },
    room.room,
  );
  if (room.project === null) {
    return h(
      'div',
      { class: 'room' },
      h(
        'span',
        {
          class: 'muted',
          title:
            'No project has this room id: removed while its devices stay connected, or registered on another auth host',
        },
        'No project (removed?)',
      ),
      id,
    );
  }
  return h(
    'div',
    { class: 'room' },
    h(
      'span',
      {},
      h('strong', {}, room.project.name),
      ' ',
      h('span', { class: 'mono muted', title: 'Project key' }, room.project.projectKey),
    ),
    id,
  );
}

/** The relay's counters and its rooms by project and user (`devices` names the devices). */
export function relayView(relay: AdminRelay, devices: AdminDevice[]): Node {
  if (relay.state === 'absent') {
    return empty(
      'This process runs the auth service only (sync-host auth): the relay runs elsewhere.',
    );
  }
  const stats = h(
    'div',
    { class: 'stats' },
    h(
      'div',
      { class: 'stat' },
      h('strong', { 'data-stat': 'connections' }, relay.connections),
      'connections',
    ),
    h('div', { class: 'stat' }, h('strong', { 'data-stat': 'rooms' }, relay.rooms), 'active rooms'),
    h(
      'div',
      { class: 'stat' },
      h('strong', { 'data-stat': 'buffered' }, relay.buffered),
      'buffered messages',
    ),
  );
  const state =
    relay.state === 'paused'
      ? h(
          'p',
          { class: 'badge warn' },
          'Paused from the tray app: clients cannot connect until it is resumed.',
        )
      : null;
  const names = new Map(devices.map((d) => [String(d.id), d.deviceName]));
  const rooms =
    relay.perRoom.length === 0
      ? empty('No device is connected right now.')
      : scrollingTable(
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              h('th', {}, 'Project'),
              h('th', {}, 'User'),
              h('th', { class: 'num' }, 'Connections'),
              h('th', {}, 'Devices'),
            ),
          ),
          h(
            'tbody',
            {},
            ...relay.perRoom.map((r) =>
              h(
                'tr',
                { 'data-room': r.room },
                h('td', {}, roomProject(r)),
                h(
                  'td',
                  { class: 'email' },
                  r.project?.email ?? h('span', { class: 'muted' }, 'unknown'),
                ),
                h('td', { class: 'num' }, r.connections),
                h(
                  'td',
                  {},
                  r.devices
                    .map((d) => {
                      const name = names.get(d);
                      return name === undefined ? `#${d}` : `${name} #${d}`;
                    })
                    .join(', '),
                ),
              ),
            ),
          ),
        );
  return h('div', {}, state, stats, rooms);
}
