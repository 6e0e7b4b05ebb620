import type { RelayError } from './errors.ts';
import type {
  ChunkAnswer,
  HostFrame,
  JoinedFrame,
  PresenceFrame,
  RoutedMessage,
  StoreFrame,
} from './relay-frames.ts';

/** Where a message goes: the room's host, everyone else in the room, or one device. */
export type Target = 'host' | 'broadcast' | string | number;

/** idle → connecting → joined ⇄ reconnecting → closed (see `RelayConnection`). */
export type ConnectionState = 'idle' | 'connecting' | 'joined' | 'reconnecting' | 'closed';

/** Why the connection ended for good. */
export interface CloseInfo {
  /** The last WebSocket close code. */
  code: number;
  /** Set when the relay ended it (auth failure, revoked, replaced...), absent after `close()`. */
  error?: RelayError;
}

/** The events of a `RelayConnection`, by name, with their listener's signature. */
export interface RelayEvents {
  /** Joined (again): after a reconnect `buffered` missed messages follow; `gap` = some were lost. */
  joined: (frame: JoinedFrame) => void;
  /** A routed message for this device (the buffered ones first after a rejoin). */
  message: (message: RoutedMessage) => void;
  presence: (frame: PresenceFrame) => void;
  /** The room has a new host. */
  host: (frame: HostFrame) => void;
  /** A frame of the host's document store (see store-frames.ts), for the provider of its doc. */
  store: (frame: StoreFrame) => void;
  /** An answer to a chunk frame (see store-frames.ts), for the `ChunkTransfer` of its `ref`. */
  chunk: (frame: ChunkAnswer) => void;
  /** An error frame from the relay, or the reason the connection ended. */
  error: (error: RelayError) => void;
  state: (state: ConnectionState) => void;
  /** The connection ended for good (`close()` or a relay refusal); no reconnect follows. */
  close: (info: CloseInfo) => void;
}
