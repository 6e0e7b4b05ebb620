import { errors, jwtVerify, SignJWT } from 'jose';

/** Longest string looked at as a JWT; ours are about 200 characters. */
const maxJwtLength = 2_048;

/** JWT lifetime: 15 minutes. */
export const jwtLifetimeSeconds = 15 * 60;
/** Audience claim: the JWT is good only for POST /auth/devices. */
const audience = 'sync-host:register-device';

const keyOf = (secret: string) => new TextEncoder().encode(secret);

/** An HS256 JWT with `sub` = user id, valid 15 minutes, only for device registration. */
export async function signLoginJwt(userId: number, secret: string, nowMs: number): Promise<string> {
  const now = Math.floor(nowMs / 1000);
  return new SignJWT({})
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(String(userId))
    .setAudience(audience)
    .setIssuedAt(now)
    .setExpirationTime(now + jwtLifetimeSeconds)
    .sign(keyOf(secret));
}

/** The user id of a valid login JWT, or undefined (bad signature, expired, wrong audience, malformed). */
export async function verifyLoginJwt(
  token: string,
  secret: string,
  nowMs: number,
): Promise<number | undefined> {
  if (token.length > maxJwtLength || token.split('.').length !== 3) return undefined;
  try {
    const { payload } = await jwtVerify(token, keyOf(secret), {
      algorithms: ['HS256'],
      audience,
      currentDate: new Date(nowMs),
    });
    const userId = Number(payload.sub);
    return Number.isSafeInteger(userId) && userId > 0 ? userId : undefined;
  } catch (err: unknown) {
    if (err instanceof errors.JOSEError || err instanceof TypeError) return undefined;
    throw err;
  }
}
