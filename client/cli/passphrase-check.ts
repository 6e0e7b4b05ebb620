import { isRelayErrorCode } from '../../protocol/relay-codes.ts';
import { docKeyOf } from '../doc-key.ts';
import { deriveE2EKey, type E2EKey } from '../e2e-key.ts';
import { SyncError } from '../errors.ts';
import { folderDocName } from '../folder/document.ts';
import type { RelayConnection } from '../relay-connection.ts';
import { storedEntries } from '../yjs-history.ts';

/**
 * The document of the host's store where the devices of an encrypted project record the key
 * check value of their passphrase (a plain name: every device finds it whatever its key). Its
 * entries carry only that value and the store proof of the key (the host keeps an entry under a
 * check value only with the proof), never anything of the passphrase itself.
 */
export const passphraseCheckDoc = 'sync-host-passphrase';

/** How long the check may take before `sync` goes on without it. */
const checkTimeoutMs = 30_000;

/**
 * What the host says of this device's passphrase: `matches` (the project's devices recorded
 * this one, or this device records it now: none was recorded, or the host holds entries under
 * it), `other` (the project holds what devices wrote under another passphrase, and nothing of
 * this one), or `unknown` (the host keeps no documents, or did not answer).
 */
export type PassphraseVerdict = 'matches' | 'other' | 'unknown';

/**
 * Checks `key` against the passphrase the project's devices use, on a connection of its own,
 * before `sync` reads or sends anything. A device whose key the host's entries of the project
 * carry already (a project encrypted before devices recorded their key) is taken as matching
 * and records its key too; one whose key they do not carry while they carry another is not,
 * whether or not a check was recorded yet; `replace` (`--new-passphrase`) records this one
 * whatever the others.
 */
export async function checkPassphrase(
  open: () => RelayConnection,
  key: E2EKey,
  replace: boolean,
): Promise<PassphraseVerdict> {
  const connection = open();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<'unknown'>((resolve) => {
    timer = setTimeout(() => resolve('unknown'), checkTimeoutMs);
  });
  try {
    return await Promise.race([verdictOn(connection, key, replace), late]);
  } catch {
    // No store on this host, or no answer: the sync itself meets the same connection next.
    return 'unknown';
  } finally {
    clearTimeout(timer);
    if (connection.state !== 'closed') await connection.close();
  }
}

async function verdictOn(
  connection: RelayConnection,
  key: E2EKey,
  replace: boolean,
): Promise<PassphraseVerdict> {
  await connection.connect();
  const found = await storedEntries(connection, passphraseCheckDoc, key, { keys: true });
  const checks = new Set(found.raw.map((entry) => entry.kc));
  if (checks.has(key.check)) return 'matches';
  if (!replace && (await othersOnly(connection, key, checks, found.kcs))) return 'other';
  await record(connection, key);
  return 'matches';
}

/**
 * Whether the host holds what the project's devices wrote under other keys and nothing under
 * `key`: from `kcs`, the key check values of every entry of the room. A host that does not name
 * them (an older one) is asked as before: only once a check is recorded, and the folder
 * document of this key then read for an entry under it.
 */
async function othersOnly(
  connection: RelayConnection,
  key: E2EKey,
  checks: ReadonlySet<string | undefined>,
  kcs: readonly string[] | undefined,
): Promise<boolean> {
  if (kcs !== undefined) return kcs.length > 0 && !kcs.includes(key.check);
  if (checks.size === 0) return false;
  const folder = await storedEntries(connection, docKeyOf(folderDocName, key), key);
  return !folder.raw.some((entry) => entry.kc === key.check);
}

/** Appends this key's check value to the check document; resolves once the host stored it. */
function record(connection: RelayConnection, key: E2EKey): Promise<void> {
  return new Promise((resolve, reject) => {
    const stops = [
      connection.on('store', (frame) => {
        if (frame.doc !== passphraseCheckDoc) return;
        if (frame.type === 'appended') done(resolve);
        else if (frame.type === 'error') {
          const code = isRelayErrorCode(frame.code) ? frame.code : 'relay_error';
          done(() => reject(new SyncError(code, frame.message)));
        }
      }),
      connection.on('close', () =>
        done(() => reject(new SyncError('closed', 'the connection ended during the check'))),
      ),
    ];
    const done = (then: () => void) => {
      for (const stop of stops) stop();
      then();
    };
    connection.sendStoreFrame(
      { type: 'append', doc: passphraseCheckDoc, ref: 1, kc: key.check, kp: key.proof },
      new TextEncoder().encode(key.check),
    );
  });
}

/**
 * The key of `passphrase` in `room` (none without one), refused when the host says the
 * project's other devices use another passphrase: asked before anything is read, written or
 * sent, since a device with another passphrase than the project's would send its files under a
 * key the others cannot open, and write nothing of theirs.
 */
export async function checkedKey(
  passphrase: string | undefined,
  room: string,
  check: ((key: E2EKey) => Promise<PassphraseVerdict>) | undefined,
): Promise<E2EKey | undefined> {
  const key = passphrase === undefined ? undefined : await deriveE2EKey(passphrase, room);
  if (key !== undefined && (await check?.(key)) === 'other') {
    throw new SyncError(
      'wrong_passphrase',
      `this device's passphrase is not the one this project's other devices use (the host holds what they wrote under another); nothing was read, sent or written. Start sync again with their passphrase (or, to change the project's passphrase, with --new-passphrase)`,
    );
  }
  return key;
}
