import { shortFingerprint } from '../protocol/fingerprint.ts';
import type { AdminConnection } from '../server/admin/types.ts';
import { h } from './dom.ts';
import { qrDataUrl } from './qr.ts';
import { copyButton } from './widgets.ts';

/** Whether a URL names this computer only (a phone cannot reach it). */
function isLoopback(url: string): boolean {
  try {
    const host = new URL(url).hostname;
    return host === 'localhost' || host === '[::1]' || host.startsWith('127.');
  } catch {
    return false;
  }
}

/**
 * A QR code of the auth URL, so a client on a phone can be pointed at this host; with TLS it
 * carries the certificate's fingerprint too (`#fp=`), which the client pins.
 */
function authQr(authUrl: string, fingerprint: string | null): HTMLElement {
  const text = fingerprint === null ? authUrl : `${authUrl}/#fp=${fingerprint}`;
  const img = h('img', {
    class: 'qr',
    width: 168,
    height: 168,
    alt: `QR code of the auth URL ${authUrl}`,
    'data-text': text,
  });
  const figure = h(
    'figure',
    { class: 'qr-figure' },
    img,
    h(
      'figcaption',
      { class: 'hint' },
      'Scan with a client on a phone or tablet to use this host (the auth URL).',
      isLoopback(authUrl)
        ? h(
            'span',
            { class: 'warn-text' },
            ' This address works on this computer only: set AUTH_BASE_URL to the LAN address for other devices.',
          )
        : null,
    ),
  );
  qrDataUrl(text).then(
    (src) => {
      img.src = src;
    },
    () => {
      figure.replaceChildren(h('p', { class: 'hint' }, 'The QR code could not be drawn.'));
    },
  );
  return figure;
}

export function connectionView(connection: AdminConnection): Node {
  const row = (label: string, value: string, key: string) =>
    h(
      'div',
      { class: 'copy-row' },
      h('label', { for: `conn-${key}` }, label),
      h('input', { id: `conn-${key}`, class: 'mono', readonly: true, value }),
      copyButton(value, 'Copy', `copy-${key}`),
    );
  const settings = JSON.stringify(
    {
      syncAuthUrl: connection.authUrl,
      syncRelayUrl: connection.relayUrl,
      ...(connection.fingerprint === null ? {} : { syncFingerprint: connection.fingerprint }),
    },
    null,
    2,
  );
  return h(
    'div',
    { class: 'connection' },
    h(
      'div',
      { class: 'connection-fields' },
      h(
        'p',
        { class: 'hint' },
        connection.mdns
          ? 'Enter these in a client, or let it find this host on the LAN (mDNS).'
          : 'Enter these in a client.',
      ),
      row('Auth URL', connection.authUrl, 'auth'),
      row('Relay URL', connection.relayUrl, 'relay'),
      connection.statusUrl ? row('Status', connection.statusUrl, 'status') : null,
      connection.fingerprint === null
        ? null
        : row('Certificate', connection.fingerprint, 'fingerprint'),
      connection.fingerprint === null
        ? null
        : h(
            'p',
            { class: 'hint', id: 'conn-fingerprint-short' },
            `A device asks to trust ${shortFingerprint(connection.fingerprint)} when it signs in: it must match. A browser warns about this self-signed certificate once: accept it for this address.`,
          ),
      h(
        'div',
        { class: 'copy-row' },
        h('label', {}, 'All'),
        copyButton(settings, 'Copy client settings', 'copy-all'),
      ),
      h('p', { class: 'hint' }, `sync-host ${connection.version}`),
    ),
    connection.authUrl ? authQr(connection.authUrl, connection.fingerprint) : null,
  );
}
