import { describe, expect, it } from 'vitest';
import { registerProject, startTestHost } from '../helpers/host.ts';
import { RelayClient } from '../helpers/relay-client.ts';
import { append } from '../helpers/store-client.ts';

/**
 * A clean stop of a headless host (what SIGTERM runs: `host.close()`) whose store holds a
 * project's documents: nothing logged above info, no stack. The relay's last store sweep ran
 * after the auth database had closed and warned, with a stack, that projects could not be
 * listed.
 */
describe('a headless host stopping cleanly', () => {
  it('logs no warning and no stack while its store holds documents', async () => {
    const logs: string[] = [];
    const th = await startTestHost({ auth: ['DEFAULT_TIER=pro'], logs });
    const me = await th.signIn('stop@example.org');
    const { roomId } = await registerProject(th.base, me.deviceToken, 'notes');
    const client = new RelayClient(th.relayUrl);
    const answer = await client.join(roomId, me.deviceId, me.deviceToken);
    expect(answer.type).toBe('joined');
    expect(await append(client, 'files', 1, 'a document')).toMatchObject({ type: 'appended' });
    client.terminate();
    logs.length = 0;
    await th.close();
    const lines = logs.map((line) => JSON.parse(line) as { level: string; msg: string });
    const loud = lines.filter((line) => !['trace', 'debug', 'info'].includes(line.level));
    expect(loud, logs.join('\n')).toEqual([]);
    expect(logs.join('\n')).not.toContain('"stack"');
    expect(lines.map((line) => line.msg)).toContain('relay closed');
  });
});
