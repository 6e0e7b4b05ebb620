import { WebSocket } from 'ws';
import type { LoginVariant } from '../../client/auth-client.ts';
import { createAuthClient } from '../../client/auth-client.ts';
import type { SignedIn } from '../../client/auth-types.ts';
import type { RelayConnection, WebSocketConstructor } from '../../client/relay-connection.ts';
import type { RoutedMessage } from '../../client/relay-frames.ts';
import type { RunningHost } from '../helpers/host-process.ts';

/** Signs in through the library: requests a link, reads the token the host printed, verifies. */
export async function signIn(
  host: RunningHost,
  email: string,
  deviceName: string,
  variant: LoginVariant = 'device',
): Promise<SignedIn> {
  const auth = createAuthClient({ authUrl: host.authUrl });
  await auth.requestLogin(email, variant);
  const token = await host.magicToken(email);
  return auth.signIn(token, { deviceName, platform: 'test' }, variant);
}

/** `ws`'s WebSocket, remembering every socket it opened so a test can cut one. */
export function trackedWebSocket(): { WebSocket: WebSocketConstructor; sockets: WebSocket[] } {
  const sockets: WebSocket[] = [];
  class TrackedWebSocket extends WebSocket {
    constructor(url: string) {
      super(url);
      sockets.push(this);
    }
  }
  return { WebSocket: TrackedWebSocket, sockets };
}

/** Every routed message a connection receives, in order. */
export function inbox(connection: RelayConnection): RoutedMessage[] {
  const messages: RoutedMessage[] = [];
  connection.on('message', (message) => messages.push(message));
  return messages;
}
