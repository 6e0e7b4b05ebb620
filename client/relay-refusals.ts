import {
  AuthFailed,
  MessageTooBig,
  Replaced,
  Revoked,
  UnsupportedData,
} from '../protocol/relay-codes.ts';
import { RelayError, type SyncErrorCode } from './errors.ts';

/** Close codes after which reconnecting cannot help, with the client's code and sentence. */
const finalCloses: Record<number, { code: SyncErrorCode; message: string }> = {
  [UnsupportedData.code]: { code: 'unsupported_data', message: 'the relay refused a binary frame' },
  [MessageTooBig.code]: {
    code: 'message_too_big',
    message: 'a message was larger than the relay accepts',
  },
  [AuthFailed.code]: { code: 'auth_failed', message: 'the relay refused the join' },
  [Revoked.code]: { code: 'revoked', message: 'this device was revoked' },
  [Replaced.code]: {
    code: 'replaced',
    message: 'this device joined the room on another connection',
  },
};

/**
 * The error a relay close ends the connection with for good, or undefined when a reconnect may
 * help. The message is the client's sentence, then the close reason; for `auth_failed` the
 * message of the error frame before the close (`refusal`) explains it better than the reason.
 */
export function refusalOf(
  code: number,
  reason: string,
  refusal: string | undefined,
): RelayError | undefined {
  const final = finalCloses[code];
  if (final === undefined) return undefined;
  const why = code === AuthFailed.code && refusal !== undefined ? refusal : reason;
  return new RelayError(final.code, why === '' ? final.message : `${final.message}: ${why}`, code);
}
