import QRCode from 'qrcode';

/** How the QR code is drawn; the tests render the same text with these options to compare. */
export const qrOptions = { type: 'svg', margin: 2, errorCorrectionLevel: 'M' } as const;

/**
 * A QR code of `text` as an SVG data URL, drawn in the page (no network fetch; the admin
 * page's CSP allows `data:` images).
 */
export async function qrDataUrl(text: string): Promise<string> {
  const svg = await QRCode.toString(text, qrOptions);
  return `data:image/svg+xml;charset=utf-8,${encodeURIComponent(svg)}`;
}
