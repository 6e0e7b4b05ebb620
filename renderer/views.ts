import type {
  AdminDevice,
  AdminMember,
  AdminPendingLinks,
  AdminProject,
  AdminRelay,
  AdminRoom,
  AdminUser,
} from '../server/admin/types.ts';
import { h } from './dom.ts';
import { copyButton, empty, scrollingTable, time } from './widgets.ts';

/** What the views ask the page to do; each resolves once done (or rejects with the error). */
export interface ViewActions {
  setSubscription(user: AdminUser, tier: string, expiresAt: string | null): Promise<void>;
  deleteUser(user: AdminUser): Promise<void>;
  revokeDevice(device: AdminDevice): Promise<void>;
  removeProject(project: AdminProject): Promise<void>;
  /** Teams: removes a member from a shared project. */
  removeMember(project: AdminProject, member: AdminMember): Promise<void>;
  /** Marks a user's row as being edited (the page holds back refreshes of the table meanwhile). */
  editing(userId: number, dirty: boolean): void;
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
        h('th', {}, 'Members'),
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
          h('td', { class: 'members' }, ...membersOf(p, actions)),
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

/** A shared project's members, each with its role and a Remove button; a dash when none. */
function membersOf(project: AdminProject, actions: ViewActions): Node[] {
  if (project.members.length === 0) return [h('span', { class: 'muted' }, '\u2014')];
  return project.members.map((member) =>
    h(
      'div',
      { 'data-member': member.email },
      h('span', { class: 'email' }, member.email),
      ` (${member.role}) `,
      h(
        'button',
        {
          type: 'button',
          class: 'danger',
          'data-key': `remove-member-${project.id}-${member.userId}`,
          onClick: () => {
            void actions.removeMember(project, member);
          },
        },
        'Remove',
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
