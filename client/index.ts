/**
 * The sync-host client library: settings, auth service, relay connection. Plain TypeScript for
 * Node and browsers; the mDNS helper (Node only) is in `./discovery.ts`.
 */
export {
  type AuthClient,
  type AuthClientOptions,
  createAuthClient,
  type LoginVariant,
  linkToken,
} from './auth-client.ts';
export type {
  ApprovedBy,
  Device,
  DeviceDescription,
  HostInfo,
  Paired,
  PairingOffer,
  PairingStarted,
  Project,
  SignedIn,
  Subscription,
  User,
} from './auth-types.ts';
export { type Backoff, type BackoffOptions, createBackoff } from './backoff.ts';
export { docKeyOf } from './doc-key.ts';
export { deriveE2EKey, type E2EKey } from './e2e-key.ts';
export {
  AuthServiceError,
  RelayError,
  SettingsError,
  SyncError,
  UnreachableError,
  type UnreachableReason,
  WrongServiceError,
} from './errors.ts';
export { type PairOptions, pair } from './pairing.ts';
export {
  type CloseInfo,
  type ConnectionState,
  createRelayConnection,
  RelayConnection,
  type RelayConnectionOptions,
  type RelayEvents,
  type Target,
  type WebSocketConstructor,
  type WebSocketLike,
} from './relay-connection.ts';
export type { HostFrame, JoinedFrame, PresenceFrame, RoutedMessage } from './relay-frames.ts';
export {
  defaultSettings,
  deviceTokenIds,
  parseSettings,
  type SyncSettings,
  type SyncSettingsInput,
  settingsSchema,
} from './settings.ts';
export { SyncClient, type SyncClientOptions } from './sync-client.ts';
export { documentAt, fetchHistory, type HistoryEntry } from './yjs-history.ts';
export {
  createYjsProvider,
  YjsProvider,
  type YjsProviderEvents,
  type YjsProviderOptions,
} from './yjs-provider.ts';
export { StoreCursor, type StoreProgress } from './yjs-store-cursor.ts';
