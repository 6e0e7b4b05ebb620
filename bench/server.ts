/**
 * One benchmarked server in its own process (forked by bench/run.ts with --expose-gc), so that
 * its CPU time in /proc/<pid>/stat is that server's alone. `argv[2]` picks the server:
 *   relay   the product (createRelay: HMAC tokens, room checks, rate limit, metrics all on)
 *   ws      the bare-ws reference forwarder (bench/reference/bare-ws.ts)
 *   sio     the Socket.IO reference (bench/reference/socket-io.ts)
 * It reports `{kind:'ready', port}` over IPC and answers `stats` and `memory` requests.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '../server/log.ts';
import { createRelay } from '../server/relay/index.ts';
import { type BenchServer, benchSecret, type ServerKind, type ServerReport } from './protocol.ts';
import { startBareWs } from './reference/bare-ws.ts';
import { startSocketIo } from './reference/socket-io.ts';

const gc = (globalThis as { gc?: () => void }).gc;

async function startRelay(): Promise<BenchServer> {
  const dir = mkdtempSync(join(tmpdir(), 'relay-bench-'));
  const relay = createRelay({
    config: {
      secret: benchSecret,
      sqlitePath: join(dir, 'relay.db'),
      wsPort: 0,
      statusPort: 0,
      bind: '127.0.0.1',
      tokenSignature: 'hmac-sha256',
      // The bucket is checked on every frame; it is only sized so that it never drops.
      ratePerSecond: 1_000_000,
      rateBurst: 1_000_000,
      roomMaxDevices: 64,
      messageMaxBytes: 1_048_576,
      bufferSeconds: 60,
      bufferMaxMessages: 10_000,
      bufferMaxBytes: 16 * 1024 * 1024,
      logLevel: 'silent',
      unknownKeys: [],
      explicit: new Set(),
    },
    secret: benchSecret,
    logger: createLogger('silent'),
  });
  const ports = await relay.listen();
  const metricsUrl = `http://127.0.0.1:${ports.statusPort}/metrics`;
  const read = (text: string, name: string) =>
    Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
  return {
    port: ports.wsPort,
    dbPath: join(dir, 'relay.db'),
    async counters() {
      const text = await (await fetch(metricsUrl)).text();
      return {
        delivered: read(text, 'relay_messages_delivered_total'),
        buffered: read(text, 'relay_messages_buffered_total'),
        bufferPending: read(text, 'relay_buffer_pending_messages'),
        bufferStored: read(text, 'relay_buffer_messages'),
      };
    },
    async close() {
      await relay.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const kind = process.argv[2] as ServerKind;
const server =
  kind === 'relay'
    ? await startRelay()
    : kind === 'ws'
      ? await startBareWs()
      : await startSocketIo();

function send(report: ServerReport): void {
  process.send?.(report);
}

process.on('message', (request: { kind: 'counters' | 'memory' | 'close' }) => {
  const answer = async () => {
    switch (request.kind) {
      case 'counters':
        return send({ kind: 'counters', ...(await server.counters()) });
      case 'memory':
        gc?.();
        gc?.();
        return send({ kind: 'memory', ...process.memoryUsage() });
      case 'close':
        await server.close();
        process.exit(0);
    }
  };
  answer().catch((err: unknown) => {
    process.stderr.write(
      `bench server ${kind}: ${err instanceof Error ? err.stack : String(err)}\n`,
    );
    process.exit(1);
  });
});
send({ kind: 'ready', port: server.port, dbPath: server.dbPath });
