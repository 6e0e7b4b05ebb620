import { projectLimits, type Tier, tiers } from '../protocol/tiers.ts';
import type { AdminUser } from '../server/admin/types.ts';
import { h } from './dom.ts';
import { dateInputValue, expiryFromDateInput } from './format.ts';
import type { ViewActions } from './views.ts';
import { empty, scrollingTable, time } from './widgets.ts';

/** "up to 1 project", "unlimited projects": what a tier allows, shown beside its selector. */
export function tierLimitText(tier: Tier): string {
  const limit = projectLimits[tier];
  if (limit === null) return 'unlimited projects';
  if (limit === 0) return 'no synced projects';
  return `up to ${limit} project${limit === 1 ? '' : 's'}`;
}

/**
 * A user's tier and expiry as a form: Save is enabled once something changed (the page then
 * holds the users' section until it is saved), the outcome in a line beside it.
 */
function subscriptionForm(user: AdminUser, actions: ViewActions): HTMLElement {
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
  return form;
}

function userRow(user: AdminUser, actions: ViewActions): HTMLElement {
  const form = subscriptionForm(user, actions);
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
