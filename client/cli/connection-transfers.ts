import type { E2EKey } from '../e2e-key.ts';
import { type BlobTransfer, blobTransferOf } from '../folder/blob-transfer.ts';
import type { ConnectionSupervisor } from './connection-supervisor.ts';

/**
 * The transfers of a sync: one on each connection the supervisor opens (the one before closed);
 * `current()` is undefined while the connection is not joined.
 */
export function connectionTransfers(
  supervisor: ConnectionSupervisor,
  key: E2EKey | undefined,
  onLost: (ids: string[]) => void,
): { current: () => BlobTransfer | undefined; close(): void } {
  let transfer = blobTransferOf(supervisor.connection, key, onLost);
  const stop = supervisor.on('connection', (connection) => {
    transfer.close();
    transfer = blobTransferOf(connection, key, onLost);
  });
  return {
    current: () => (supervisor.state === 'joined' ? transfer : undefined),
    close() {
      stop();
      transfer.close();
    },
  };
}
