import type { Request } from 'express';

/** The client address rate limits count against (the proxy's, behind a reverse proxy). */
export const clientOf = (req: Request): string => req.ip ?? req.socket.remoteAddress ?? 'unknown';

/** `Bearer <token>`, the token at most 4,096 characters (longer is no token of ours). */
const bearerHeader = /^Bearer[ \t]+(\S{1,4096})[ \t]*$/i;

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearer(req: Request): string | undefined {
  const header = req.headers.authorization;
  if (typeof header !== 'string') return undefined;
  return bearerHeader.exec(header)?.[1];
}
