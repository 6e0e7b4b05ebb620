/**
 * Connection set-up with TLS against without: the time to open and join 1,000 devices (TCP,
 * the TLS handshake when on, the WebSocket upgrade, the join and its token check), and the
 * server's CPU for it, on the relay and on bare ws, each a fresh process per measurement, plain
 * and TLS alternated (the order reversed every round). The certificate is the bench's own
 * self-signed ECDSA P-256 one (bench/tls.ts), as the host makes.
 */
import { connect, release } from '../measure.ts';
import type { BenchOptions } from '../options.ts';
import { counters, type Processes } from '../processes.ts';
import { type ServerKind, serverNames } from '../protocol.ts';
import { has, medianWithSpread, print, ratio, record } from '../stats.ts';

/** Devices opened and joined per measurement. */
export const setupDevices = 1_000;

const modes = [
  ['plain', false],
  ['tls', true],
] as const;

async function setupPoint(procs: Processes, kind: ServerKind, tls: boolean): Promise<void> {
  const { server, url } = await procs.startServer(kind, tls);
  const load = procs.load(kind);
  const before = await counters(server);
  const opened = await connect(load, kind, url, setupDevices);
  const after = await counters(server);
  const mode = tls ? 'tls' : 'plain';
  record(`${kind}.setup.${mode}.s`, opened.seconds);
  record(`${kind}.setup.${mode}.cpuMs`, (after.cpuSeconds - before.cpuSeconds) * 1000);
  await release(load);
  await procs.stopServer(server);
}

export async function runTlsSetup(options: BenchOptions, procs: Processes): Promise<void> {
  const rounds = options.quick ? 3 : 5;
  const kinds = options.kinds.filter((kind) => kind !== 'sio');
  for (let round = 1; round <= rounds; round++) {
    const order = round % 2 === 1 ? modes : [...modes].reverse();
    for (const kind of kinds) {
      for (const [name, tls] of order) {
        process.stderr.write(`tls set-up ${round}/${rounds}: ${serverNames[kind]} ${name}\n`);
        await setupPoint(procs, kind, tls);
      }
    }
  }
}

export function reportTlsSetup(options: BenchOptions): void {
  const kinds = options.kinds.filter((kind) => has(`${kind}.setup.plain.s`));
  if (kinds.length === 0) return;
  print();
  print(
    `| ${setupDevices.toLocaleString('en')} devices opened and joined | ${kinds.flatMap((kind) => [`${serverNames[kind]}, plain`, `${serverNames[kind]}, TLS`]).join(' | ')} |`,
  );
  print(`|---|${kinds.map(() => '---|---|').join('')}`);
  const row = (label: string, measure: string, digits: number) =>
    print(
      `| ${label} | ${kinds.flatMap((kind) => modes.map(([mode]) => medianWithSpread(`${kind}.setup.${mode}.${measure}`, digits))).join(' | ')} |`,
    );
  row('set-up time, s (the load generator: connect, handshake, upgrade, join)', 's', 2);
  row('server CPU for it, ms', 'cpuMs', 0);
  print('Medians, with (min–max), over the rounds; a fresh server process per measurement.');
  for (const kind of kinds) {
    const name = serverNames[kind];
    const noTarget = Number.POSITIVE_INFINITY;
    ratio(
      `set-up time, TLS ÷ plain, ${name} (no target)`,
      `${kind}.setup.tls.s`,
      `${kind}.setup.plain.s`,
      noTarget,
    );
    ratio(
      `set-up server CPU, TLS ÷ plain, ${name} (no target)`,
      `${kind}.setup.tls.cpuMs`,
      `${kind}.setup.plain.cpuMs`,
      noTarget,
    );
  }
  ratio(
    'set-up time with TLS, relay ÷ bare ws (no target)',
    'relay.setup.tls.s',
    'ws.setup.tls.s',
    Number.POSITIVE_INFINITY,
  );
}
