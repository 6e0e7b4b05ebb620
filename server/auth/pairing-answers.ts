import type { Db } from '../db/connect.ts';
import { deleteDevice } from '../db/devices.ts';
import { findPairingById, type Pairing, transitionPairing } from '../db/pairings.ts';
import type { Logger } from '../log.ts';
import { notFound } from './errors.ts';
import type { Limiter } from './rate-limits.ts';

export interface PairingAnswerDeps {
  db: Db;
  logger: Logger;
  now: () => number;
  /** Unknown pairingIds per client address (guessing ids), shared with the poll. */
  unknownIds: Limiter;
  notifyRevoked(deviceId: number, userId: number): void;
}

/**
 * The new device's answer to an approval by a signed-in device (a pairing `offered`): it was
 * shown the account it would join, and accepts it (its next poll collects the token) or
 * declines it (the device made at approval is removed, the pairing denied). The pairingId is
 * the new device's secret: nobody else can answer for it.
 */
export function createPairingAnswers(deps: PairingAnswerDeps) {
  const { db, logger, now } = deps;

  async function offered(pairingId: string, client: string): Promise<Pairing> {
    const pairing = /^[0-9a-f]{64}$/.test(pairingId)
      ? await findPairingById(db, pairingId)
      : undefined;
    if (pairing === undefined) await deps.unknownIds.consume(client);
    if (
      pairing === undefined ||
      pairing.status !== 'offered' ||
      Date.parse(pairing.expiresAt) <= now()
    )
      throw notFound('pairing waiting for this device to accept an account');
    return pairing;
  }

  return {
    /** POST /auth/pair/accept: the new device joins the account it was shown. */
    async accept(pairingId: string, client: string): Promise<void> {
      const pairing = await offered(pairingId, client);
      if (!(await transitionPairing(db, pairing.id, 'offered', 'approved')))
        throw notFound('pairing');
      logger.info({ deviceId: pairing.deviceId, userId: pairing.userId }, 'pairing accepted');
    },

    /** POST /auth/pair/decline: the new device refuses the account; its device is removed. */
    async decline(pairingId: string, client: string): Promise<void> {
      const pairing = await offered(pairingId, client);
      if (!(await transitionPairing(db, pairing.id, 'offered', 'denied')))
        throw notFound('pairing');
      if (pairing.deviceId !== null && pairing.userId !== null) {
        await deleteDevice(db, pairing.deviceId, pairing.userId, new Date(now()));
        deps.notifyRevoked(pairing.deviceId, pairing.userId);
      }
      logger.warn(
        { deviceId: pairing.deviceId, userId: pairing.userId, approver: pairing.approverName },
        'pairing declined by the new device: it did not want the account it was approved into',
      );
    },
  };
}
