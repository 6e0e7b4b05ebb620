import { loadConfig } from '../../server/config/load.ts';
import { type Host, startHost } from '../../server/host.ts';
import { captureLogger } from './capture.ts';

/**
 * `sync-host relay` in this process with the relay.conf of `dir`, its clock `offsetMs` off (an
 * injected clock), and its log lines from info up.
 */
export async function startSkewedRelay(
  dir: string,
  offsetMs: number,
): Promise<{ host: Host; lines: string[] }> {
  const { logger, lines } = captureLogger('info');
  const host = await startHost({
    mode: 'relay',
    config: loadConfig(dir, {}),
    logger,
    print: () => undefined,
    now: () => Date.now() + offsetMs,
  });
  return { host, lines };
}
