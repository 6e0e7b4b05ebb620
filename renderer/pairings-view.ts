import type { AdminPairing, AdminUser } from '../server/admin/types.ts';
import { h } from './dom.ts';
import { time } from './widgets.ts';

/** What the pairing cards ask the page to do; each rejects with the error when it fails. */
export interface PairingActions {
  approve(pairing: AdminPairing, email: string): Promise<void>;
  deny(pairing: AdminPairing): Promise<void>;
}

/** The select value that shows the e-mail field (any address, a new user when unknown). */
const other = '';

/** `XXXX-XXXX` from what a URL or a person wrote (any case, with or without the dash). */
export function normalizePairCode(input: string): string | undefined {
  const letters = input.toUpperCase().replace(/[^A-Z]/g, '');
  return letters.length === 8 ? `${letters.slice(0, 4)}-${letters.slice(4)}` : undefined;
}

interface Card {
  el: HTMLElement;
  setUsers(users: AdminUser[]): void;
}

function pairingCard(pairing: AdminPairing, actions: PairingActions): Card {
  const { form, select, showEmail } = approveForm(pairing, actions);
  const el = h(
    'article',
    { class: 'pair-card', 'data-code': pairing.code, 'aria-label': `Pairing ${pairing.code}` },
    h(
      'p',
      { class: 'pair-code mono', title: 'Check that the device shows this code' },
      pairing.code,
    ),
    pairingFacts(pairing),
    form,
  );

  let first = true;
  return {
    el,
    setUsers(users) {
      const wanted = first
        ? pairing.email
          ? (users.find((u) => u.email === pairing.email)?.email ?? other)
          : ((users.find((u) => u.owner) ?? users[0])?.email ?? other)
        : select.value;
      first = false;
      select.replaceChildren(
        ...users.map((u) =>
          h('option', { value: u.email }, u.owner ? `${u.email} (owner)` : u.email),
        ),
        h(
          'option',
          { value: other },
          users.length === 0 ? 'A new user (the first is the owner)' : 'Someone else…',
        ),
      );
      select.value = users.some((u) => u.email === wanted) ? wanted : other;
      showEmail();
    },
  };
}

/** What the device told of itself: name, platform, address, when, and the user it asked for. */
function pairingFacts(pairing: AdminPairing): HTMLElement {
  const facts = (label: string, ...value: Array<Node | string>) =>
    h('div', {}, h('dt', {}, label), h('dd', {}, ...value));
  return h(
    'dl',
    { class: 'pair-facts' },
    facts('Device', h('strong', {}, pairing.deviceName)),
    facts('Platform', pairing.platform),
    facts('Address', h('span', { class: 'mono' }, pairing.clientAddress)),
    facts('Asked', time(pairing.createdAt), ' · expires ', time(pairing.expiresAt)),
    pairing.email ? facts('For user', pairing.email) : null,
  );
}

/**
 * The card's form: the user to add the device to (a known one, or an e-mail typed for someone
 * else), Approve and Deny; disabled while a choice is on its way, enabled again when it fails.
 */
function approveForm(pairing: AdminPairing, actions: PairingActions) {
  const id = `pair-${pairing.code}`;
  const select = h('select', { id: `${id}-user`, 'data-key': `${id}-user`, name: 'user' });
  const email = h('input', {
    id: `${id}-email`,
    'data-key': `${id}-email`,
    type: 'email',
    name: 'email',
    autocomplete: 'off',
    placeholder: 'name@example.com',
    'aria-label': `E-mail of the new device's user (${pairing.code})`,
    value: pairing.email ?? '',
  });
  const approve = h('button', { type: 'submit', class: 'primary' }, 'Approve');
  const busy = (on: boolean) => {
    for (const el of [select, email, approve, deny]) el.disabled = on;
  };
  const deny = h(
    'button',
    {
      type: 'button',
      class: 'danger',
      onClick: () => {
        busy(true);
        actions.deny(pairing).catch(() => busy(false));
      },
    },
    'Deny',
  );
  const showEmail = () => {
    email.hidden = select.value !== other;
    email.required = !email.hidden;
  };
  select.addEventListener('change', showEmail);
  const form = h(
    'form',
    {
      class: 'pair-approve',
      'aria-label': `Approve or deny ${pairing.code}`,
      onSubmit: (event: Event) => {
        event.preventDefault();
        const address = select.value === other ? email.value.trim() : select.value;
        if (address === '') {
          email.focus();
          return;
        }
        busy(true);
        actions.approve(pairing, address).catch(() => busy(false));
      },
    },
    h('label', { for: select.id }, 'Add to'),
    select,
    email,
    h('span', { class: 'row-actions' }, approve, deny),
  );
  return { form, select, showEmail };
}

/**
 * The live list of pending pairings. Cards are kept across refreshes (keyed by code), so what
 * the administrator is typing or choosing in one survives another request arriving.
 */
export function createPairingsPanel(container: Element, actions: PairingActions) {
  const cards = new Map<string, Card>();
  let usersKey = '';
  return {
    /** Shows `pairings`; `highlight` is the code of `#pair=` (marked and returned when shown). */
    render(
      pairings: AdminPairing[],
      users: AdminUser[],
      authUrl: string,
      highlight?: string,
    ): HTMLElement | null {
      const nextUsersKey = JSON.stringify(users.map((u) => [u.email, u.owner]));
      const usersChanged = nextUsersKey !== usersKey;
      usersKey = nextUsersKey;
      for (const code of cards.keys()) {
        if (!pairings.some((p) => p.code === code)) cards.delete(code);
      }
      const shown = pairings.map((p) => {
        let card = cards.get(p.code);
        if (!card) {
          card = pairingCard(p, actions);
          card.setUsers(users);
          cards.set(p.code, card);
        } else if (usersChanged) card.setUsers(users);
        const marked = p.code === highlight;
        card.el.classList.toggle('highlight', marked);
        if (marked) card.el.setAttribute('aria-current', 'true');
        else card.el.removeAttribute('aria-current');
        return card.el;
      });
      const current = [...container.children];
      const same =
        shown.length === 0
          ? current[0]?.classList.contains('empty') === true
          : current.length === shown.length && current.every((el, i) => el === shown[i]);
      if (!same) {
        const active = document.activeElement;
        container.replaceChildren(
          ...(shown.length > 0
            ? shown
            : [
                h(
                  'p',
                  { class: 'empty' },
                  'No device is waiting. On the new device run ',
                  h('code', {}, `sync-host login --auth ${authUrl}`),
                  ' (or open a client and choose this host): its code appears here within a few seconds.',
                ),
              ]),
        );
        if (
          active instanceof HTMLElement &&
          active !== document.activeElement &&
          active.isConnected
        )
          active.focus();
      }
      return highlight === undefined ? null : (cards.get(highlight)?.el ?? null);
    },
  };
}
