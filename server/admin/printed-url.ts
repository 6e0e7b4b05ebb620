import type { Host } from '../host.ts';

/**
 * The lines that show the admin URL at start. The URL with its token (`#token=…`, a fragment no
 * browser sends) is printed once, by the start that created the token; every later start prints
 * the URL without it and the file that keeps the token, so that the token does not pile up in
 * the journal. The admin UI asks for the token when its URL has none.
 */
export function adminUrlLines(host: Pick<Host, 'urls' | 'adminTokenFile'>): string[] {
  const { admin } = host.urls;
  if (admin === undefined) return [];
  if (host.adminTokenFile.created) return [`admin:  ${admin}`];
  return [
    `admin:  ${admin.slice(0, admin.indexOf('#'))}`,
    `        (the admin token is in ${host.adminTokenFile.path}; the UI asks for it)`,
  ];
}
