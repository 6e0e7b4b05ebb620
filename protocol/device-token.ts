/** What a device token says: `<userId>:<deviceId>:<issuedAt>.<hash>`. */
export interface DeviceTokenClaims {
  userId: number;
  deviceId: number;
  /** Unix seconds at issue. */
  issuedAt: number;
}

/** Longest string looked at as a device token. */
export const maxDeviceTokenLength = 255;

/** Ids of up to 15 digits, a timestamp of up to 12, and a djb2 (8 hex) or HMAC-SHA256 (64 hex) hash. */
const deviceTokenShape = /^([1-9]\d{0,14}):([1-9]\d{0,14}):(\d{1,12})\.([0-9a-f]{8}|[0-9a-f]{64})$/;

/** The signed part of a device token: `<userId>:<deviceId>:<issuedAt>`. */
export function deviceTokenPayload(claims: DeviceTokenClaims): string {
  return `${claims.userId}:${claims.deviceId}:${claims.issuedAt}`;
}

/**
 * Parses a device token without checking its signature; undefined when it is not of the shape
 * `<userId>:<deviceId>:<timestamp>.<hash>`.
 */
export function parseDeviceToken(
  token: unknown,
): (DeviceTokenClaims & { hash: string; payload: string }) | undefined {
  if (typeof token !== 'string' || token.length > maxDeviceTokenLength) return undefined;
  const match = deviceTokenShape.exec(token);
  if (match === null) return undefined;
  const [, user, device, issued, hash] = match as unknown as [
    string,
    string,
    string,
    string,
    string,
  ];
  return {
    userId: Number(user),
    deviceId: Number(device),
    issuedAt: Number(issued),
    hash,
    payload: `${user}:${device}:${issued}`,
  };
}
