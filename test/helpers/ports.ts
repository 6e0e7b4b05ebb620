import { randomInt } from 'node:crypto';
import { createServer } from 'node:net';

/**
 * Ports handed out below Linux's ephemeral range (32768–60999). A test that needs to know a port
 * before its program starts cannot keep the port bound; if it took one the OS picked for
 * `listen(0)`, any other test's `listen(0)` or outgoing connection could take the same number in
 * the gap (CI once saw "port … is already in use" that way). Ports from this range are never
 * picked by the OS, so only another test's `freePort` could collide, one chance in thousands.
 */
const LOW = 20_000;
const HIGH = 32_767;
const handedOut = new Set<number>();

/** Whether `port` can be bound on 127.0.0.1 right now (the listener is closed again). */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A port that was free a moment ago on 127.0.0.1, outside the range the OS picks from. */
export async function freePort(): Promise<number> {
  for (let tries = 0; tries < 200; tries++) {
    const port = randomInt(LOW, HIGH + 1);
    if (handedOut.has(port)) continue;
    if (await bindable(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`no free port between ${LOW} and ${HIGH} after 200 tries`);
}
