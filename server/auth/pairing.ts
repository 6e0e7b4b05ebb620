import { randomInt } from 'node:crypto';
import { parseDeviceToken } from '../../protocol/device-token.ts';
import { addressGroup } from '../address-group.ts';
import type { TokenSignature } from '../config/common.ts';
import type { Db } from '../db/connect.ts';
import { type Device, deleteDevice, findDeviceForAuth } from '../db/devices.ts';
import {
  type ApprovedVia,
  createPairing,
  findPairingById,
  findPairingByLink,
  findPendingByCode,
  listPendingPairings,
  listUnclaimedExpired,
  type Pairing,
  purgePairings,
  transitionPairing,
} from '../db/pairings.ts';
import type { User } from '../db/users.ts';
import { randomHex, sha256Hex } from '../hashing.ts';
import type { Logger } from '../log.ts';
import { signDeviceToken } from '../tokens.ts';
import { AppError, notFound } from './errors.ts';
import { createPairingAnswers } from './pairing-answers.ts';
import type { Limiter } from './rate-limits.ts';

/** The letters of a pairing code: no vowels (no words), no look-alikes of digits. */
export const pairingAlphabet = 'BCDFGHJKLMNPQRSTVWXZ';
/** A pairing is valid 10 minutes. */
export const pairingLifetimeMs = 10 * 60_000;
/** Seconds a device waits between two polls; polling faster is 429. */
export const pairingIntervalSeconds = 2;
/** An approval leaves the device at least this long to collect its token. */
const claimGraceMs = 60_000;
/** Polls this much earlier than the interval are still accepted (timer jitter, clock skew). */
const pollToleranceMs = 250;
/** Expired pairings are kept this long, so a late poll still reads `token_expired`. */
const keepExpiredMs = 10 * 60_000;
const housekeepingEveryMs = 60_000;

/** `XXXX-XXXX` from 8 normalized letters. */
export const formatCode = (code: string): string => `${code.slice(0, 4)}-${code.slice(4)}`;

/** A code as typed (any case, with or without the dash or spaces) → 8 letters, or undefined. */
export function normalizeCode(input: string): string | undefined {
  const code = input.replace(/[\s-]/g, '').toUpperCase();
  return code.length === 8 && [...code].every((c) => pairingAlphabet.includes(c))
    ? code
    : undefined;
}

function newCode(): string {
  let code = '';
  for (let i = 0; i < 8; i++) code += pairingAlphabet[randomInt(pairingAlphabet.length)];
  return code;
}

/** Who approved a pairing, as the new device is told. */
export interface ApprovedBy {
  via: ApprovedVia;
  /** The approving device's name (`device`), the link's address (`link`), null for `admin`. */
  name: string | null;
}

export type PollAnswer =
  | { status: 'pending' }
  /** Approved by a signed-in device: the account it joins, for the new device to accept. */
  | { status: 'confirm'; email: string; approvedBy: ApprovedBy }
  | { status: 'approved'; deviceToken: string; device: Device; user: User; approvedBy: ApprovedBy };

/** A pending pairing as the admin API lists it. */
export interface PendingPairing {
  /** `XXXX-XXXX`, as the device shows it. */
  code: string;
  deviceName: string;
  platform: string;
  /** The address the device asked to join as, if it gave one. */
  email: string | null;
  clientAddress: string;
  createdAt: string;
  expiresAt: string;
}

export interface PairingLimiters {
  creations: Limiter;
  unknownIds: Limiter;
  codeFailuresPerApprover: Limiter;
  codeFailuresPerClient: Limiter;
}

export interface PairingDeps {
  db: Db;
  logger: Logger;
  now: () => number;
  limiters: PairingLimiters;
  /** Pairings waiting for approval at once, from every address together. */
  maxPending: number;
  /** Pending pairings at once from one client address (its /64 for IPv6). */
  maxPendingPerClient: number;
  settings: { secret: string; tokenSignature: TokenSignature; baseUrl: string };
  /** A new device of a user, with its freshly signed token. */
  addDevice(
    userId: number,
    input: { deviceName: string; platform: string },
  ): Promise<{ device: Device; token: string }>;
  /** The user of an e-mail, created (with its subscription) when new. */
  userFor(email: string): Promise<User>;
  /** Creates and sends (or prints) a magic link; undefined when the allowlist refuses it. */
  issueLink(email: string, client: string): Promise<string | undefined>;
  notifyRevoked(deviceId: number, userId: number): void;
}

/** The approver of a code: a signed-in device, the administrator, or a pairing's own link. */
export type Approver =
  | { via: 'device'; user: User; device: Device }
  | { via: 'admin'; email: string | undefined }
  | { via: 'link'; email: string };

export type PairingService = ReturnType<typeof createPairingService>;

/** What the parts of the pairing service share: its dependencies and the last poll of each id. */
interface PairingContext {
  deps: PairingDeps;
  /** The time of each pairing's last poll, by the hash of its id. */
  lastPoll: Map<string, number>;
  /** Removes the devices of approvals nobody collected, and old rows; at most once a minute. */
  housekeeping(): Promise<void>;
}

/** Pairing: a new device shows a short code that a person approves elsewhere. */
export function createPairingService(deps: PairingDeps) {
  const { db, logger, now, limiters } = deps;
  const lastPoll = new Map<string, number>();
  const ctx: PairingContext = { deps, lastPoll, housekeeping: createHousekeeping(deps, lastPoll) };
  return {
    ...createPairingAnswers({
      db,
      logger,
      now,
      unknownIds: limiters.unknownIds,
      notifyRevoked: deps.notifyRevoked,
    }),
    ...deviceRequests(ctx),
    ...approverRequests(ctx),
  };
}

/** Removes the devices of approvals nobody collected, and old rows; at most once a minute. */
function createHousekeeping(deps: PairingDeps, lastPoll: Map<string, number>) {
  const { db, logger, now } = deps;
  let lastHousekeeping = 0;
  return async function housekeeping(): Promise<void> {
    if (now() - lastHousekeeping < housekeepingEveryMs) return;
    lastHousekeeping = now();
    for (const stale of await listUnclaimedExpired(db, new Date(now()))) {
      if (!(await transitionPairing(db, stale.id, stale.status, 'expired'))) continue;
      if (stale.deviceId !== null && stale.userId !== null) {
        await deleteDevice(db, stale.deviceId, stale.userId, new Date(now()));
        deps.notifyRevoked(stale.deviceId, stale.userId);
      }
      logger.info({ code: formatCode(stale.code) }, 'pairing approved but never collected');
    }
    await purgePairings(db, new Date(now() - keepExpiredMs));
    if (lastPoll.size > 10_000) lastPoll.clear();
  };
}

/** What the new device asks: a pairing, then its state until it collects its token. */
function deviceRequests(ctx: PairingContext) {
  const { db, logger, now, settings } = ctx.deps;
  return {
    /** POST /auth/pair: a new pending pairing (and a magic link when an e-mail is given). */
    async create(
      input: { deviceName: string; platform: string; email?: string | undefined },
      client: string,
    ) {
      await ctx.deps.limiters.creations.consume(client);
      await ctx.housekeeping();
      refuseOverCaps(ctx.deps, await listPendingPairings(db, new Date(now())), client);
      const pairingId = randomHex(32);
      const code = newCode();
      const created = new Date(now());
      const expires = new Date(created.getTime() + pairingLifetimeMs);
      const linkToken =
        input.email === undefined ? undefined : await ctx.deps.issueLink(input.email, client);
      await createPairing(db, {
        pairingId,
        code,
        deviceName: input.deviceName,
        platform: input.platform,
        email: input.email ?? null,
        clientAddress: client.slice(0, 64),
        linkToken: linkToken ?? null,
        createdAt: created,
        expiresAt: expires,
      });
      ctx.lastPoll.set(sha256Hex(pairingId), created.getTime());
      logger.info(
        { code: formatCode(code), deviceName: input.deviceName, client, email: input.email },
        'pairing requested',
      );
      return {
        pairingId,
        code: formatCode(code),
        expiresAt: expires.toISOString(),
        interval: pairingIntervalSeconds,
        approveUrl: `${settings.baseUrl}/admin/#pair=${formatCode(code)}`,
      };
    },

    /** GET /auth/pair/:pairingId: pending, or the device token once, or why not. */
    async poll(pairingId: string, client: string): Promise<PollAnswer> {
      const key = sha256Hex(pairingId);
      const previous = ctx.lastPoll.get(key);
      const at = now();
      if (
        previous !== undefined &&
        at - previous < pairingIntervalSeconds * 1000 - pollToleranceMs
      ) {
        throw new AppError(
          'rate_limited',
          `poll at most every ${pairingIntervalSeconds} seconds`,
          pairingIntervalSeconds,
        );
      }
      ctx.lastPoll.set(key, at);
      const pairing = /^[0-9a-f]{64}$/.test(pairingId)
        ? await findPairingById(db, pairingId)
        : undefined;
      if (pairing === undefined || pairing.status === 'claimed') {
        ctx.lastPoll.delete(key);
        await ctx.deps.limiters.unknownIds.consume(client);
        throw notFound('pairing');
      }
      if (pairing.status === 'denied') throw new AppError('pair_denied', 'the pairing was denied');
      if (pairing.status === 'expired' || Date.parse(pairing.expiresAt) <= at)
        throw new AppError('token_expired', 'the pairing code has expired; start again');
      if (pairing.status === 'pending') return { status: 'pending' };
      if (pairing.status === 'offered') return offer(ctx.deps, pairing);
      if (!(await transitionPairing(db, pairing.id, 'approved', 'claimed')))
        throw notFound('pairing');
      ctx.lastPoll.delete(key);
      return collect(ctx.deps, pairing);
    },
  };
}

/**
 * The pending pairings' caps, before a new one: a cap per address first (a few addresses cannot
 * take every place from the others), then one for all addresses together (many addresses cannot
 * bury the admin UI in cards).
 */
function refuseOverCaps(deps: PairingDeps, pending: Pairing[], client: string): void {
  const { logger } = deps;
  const group = addressGroup(client);
  const fromHere = pending.filter((each) => addressGroup(each.clientAddress) === group);
  if (fromHere.length >= deps.maxPendingPerClient) {
    logger.warn(
      { client, limit: deps.maxPendingPerClient },
      'pairing refused: too many pending from this address',
    );
    throw new AppError(
      'rate_limited',
      'too many devices from this address are waiting for approval; approve or deny them, or try again in a few minutes',
      60,
    );
  }
  if (pending.length >= deps.maxPending) {
    logger.warn({ client, limit: deps.maxPending }, 'pairing refused: too many pending');
    throw new AppError(
      'rate_limited',
      'too many devices are waiting for approval; try again in a few minutes',
      60,
    );
  }
}

/** What a new device approved by a signed-in device is asked to accept: the account. */
async function offer(deps: PairingDeps, pairing: Pairing): Promise<PollAnswer> {
  const found =
    pairing.deviceId === null ? undefined : await findDeviceForAuth(deps.db, pairing.deviceId);
  if (found === undefined) throw notFound('pairing');
  return {
    status: 'confirm',
    email: found.user.email,
    approvedBy: { via: 'device', name: pairing.approverName },
  };
}

/** The device token of an approved pairing just claimed, signed for its device. */
async function collect(deps: PairingDeps, pairing: Pairing): Promise<PollAnswer> {
  const { db, logger, settings } = deps;
  const found =
    pairing.deviceId === null ? undefined : await findDeviceForAuth(db, pairing.deviceId);
  if (found === undefined || pairing.userId === null || pairing.tokenIssuedAt === null)
    throw notFound('pairing');
  const deviceToken = signDeviceToken(
    { userId: pairing.userId, deviceId: found.device.id, issuedAt: pairing.tokenIssuedAt },
    settings.secret,
    settings.tokenSignature,
  );
  logger.info({ deviceId: found.device.id, userId: pairing.userId }, 'pairing collected');
  return {
    status: 'approved',
    deviceToken,
    device: found.device,
    user: found.user,
    approvedBy: { via: pairing.approvedVia ?? 'admin', name: pairing.approverName },
  };
}

/** What an approver asks of a code: approve, describe, deny; and the admin's pending list. */
function approverRequests(ctx: PairingContext) {
  const { db, logger, now } = ctx.deps;
  const byCode = (code: string, approver: Approver, client: string) =>
    pendingByCode(ctx.deps, code, approverKey(approver), client);
  return {
    /**
     * Approves the pairing of a code for the approver's user (or the given e-mail's); with
     * `deviceName`, only when the waiting device has that name (the approver confirmed it).
     */
    async approveCode(code: string, approver: Approver, client: string, deviceName?: string) {
      const pairing = await byCode(code, approver, client);
      if (deviceName !== undefined && deviceName !== pairing.deviceName)
        throw new AppError(
          'invalid_request',
          `the device waiting with this code is "${pairing.deviceName}", not "${deviceName}": approve nothing you did not start`,
        );
      return approve(ctx.deps, pairing, approver);
    },

    /** The waiting device of a code, for an approver to check before approving. */
    async describeCode(code: string, approver: Approver, client: string) {
      const pairing = await byCode(code, approver, client);
      return describe(pairing);
    },

    /** Denies the pairing of a code; its device then polls 403 `pair_denied`. */
    async denyCode(code: string, approver: Approver, client: string): Promise<void> {
      const pairing = await byCode(code, approver, client);
      if (!(await transitionPairing(db, pairing.id, 'pending', 'denied')))
        throw notFound('pairing code');
      logger.info({ code: formatCode(pairing.code), via: approver.via }, 'pairing denied');
    },

    /** The pairing a magic link was sent with (what the confirm page describes). */
    pairingOfLink: (linkToken: string) => findPairingByLink(db, linkToken),

    /** Approves the pairing of a used magic link for the link's address. */
    async approveByLink(pairing: Pairing, email: string) {
      if (pairing.status !== 'pending' || Date.parse(pairing.expiresAt) <= now())
        throw new AppError('token_expired', 'this pairing is no longer waiting for approval');
      return approve(ctx.deps, pairing, { via: 'link', email });
    },

    /** Pending pairings for the admin API, oldest first. */
    async pending(): Promise<PendingPairing[]> {
      await ctx.housekeeping();
      return (await listPendingPairings(db, new Date(now()))).map(describe);
    },
  };
}

/**
 * The pending pairing of a code. Wrong codes count against the approver and the client
 * address. An approver that used up its own wrong codes is refused even the right one (a code
 * is short, guessing must stop); the address counts only failures, so a right code from
 * another approver behind the same address always passes.
 */
async function pendingByCode(
  deps: PairingDeps,
  input: string,
  approverKey: string,
  client: string,
) {
  const { db, logger, now, limiters } = deps;
  // The administrator sees every pending code in the admin UI: nothing to guess, and never
  // locked out of approving or denying by wrong codes.
  const limited = approverKey !== 'admin';
  if (limited) await limiters.codeFailuresPerApprover.refuseIfSpent(approverKey);
  const code = normalizeCode(input);
  const pairing =
    code === undefined ? undefined : await findPendingByCode(db, code, new Date(now()));
  if (pairing !== undefined) return pairing;
  logger.warn({ client, approver: approverKey }, 'pairing: unknown or wrong code');
  if (limited) {
    await limiters.codeFailuresPerApprover.consume(approverKey);
    await limiters.codeFailuresPerClient.consume(client);
  }
  throw notFound('pairing code');
}

const approverKey = (approver: Approver): string =>
  approver.via === 'device' ? `device:${approver.device.id}` : approver.via;

async function approve(
  deps: PairingDeps,
  pairing: Pairing,
  approver: Approver,
): Promise<{ device: Device; user: User }> {
  const { db, logger, now } = deps;
  // A device approves into its own account: the new device is told which and must accept it
  // before it gets its token (someone else's code typed by mistake, or on purpose).
  const to = approver.via === 'device' ? 'offered' : 'approved';
  const user =
    approver.via === 'device'
      ? approver.user
      : await deps.userFor(approver.email ?? pairing.email ?? missingEmail());
  const created = await deps.addDevice(user.id, {
    deviceName: pairing.deviceName,
    platform: pairing.platform,
  });
  const issuedAt = parseDeviceToken(created.token)?.issuedAt ?? Math.floor(now() / 1000);
  const approverName =
    approver.via === 'device'
      ? approver.device.deviceName
      : approver.via === 'link'
        ? approver.email
        : undefined;
  const won = await transitionPairing(db, pairing.id, 'pending', to, {
    userId: user.id,
    deviceId: created.device.id,
    tokenIssuedAt: issuedAt,
    approvedVia: approver.via,
    ...(approverName === undefined ? {} : { approverName }),
    expiresAt: new Date(Math.max(Date.parse(pairing.expiresAt), now() + claimGraceMs)),
  });
  if (!won) {
    // Denied, approved or expired in the meantime: the device must not stay.
    await deleteDevice(db, created.device.id, user.id, new Date(now()));
    deps.notifyRevoked(created.device.id, user.id);
    throw notFound('pairing code');
  }
  logger.info(
    {
      code: formatCode(pairing.code),
      userId: user.id,
      deviceId: created.device.id,
      via: approver.via,
    },
    'pairing approved',
  );
  return { device: created.device, user };
}

/** A pending pairing as an approver sees it. */
const describe = (p: Pairing): PendingPairing => ({
  code: formatCode(p.code),
  deviceName: p.deviceName,
  platform: p.platform,
  email: p.email,
  clientAddress: p.clientAddress,
  createdAt: p.createdAt,
  expiresAt: p.expiresAt,
});

function missingEmail(): never {
  throw new AppError('invalid_request', 'email is required (the user the device is added to)');
}
