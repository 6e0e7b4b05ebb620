import type { Request } from 'express';

/** The client address rate limits count against (the proxy's, behind a reverse proxy). */
export const clientOf = (req: Request): string => req.ip ?? req.socket.remoteAddress ?? 'unknown';

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearer(req: Request): string | undefined {
  const header = req.headers.authorization;
  if (typeof header !== 'string') return undefined;
  return /^Bearer[ \t]+(\S{1,4096})[ \t]*$/i.exec(header)?.[1];
}
