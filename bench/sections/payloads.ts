/**
 * Large payloads: server CPU per delivered message for 1 KiB, 64 KiB and 512 KiB payloads,
 * direct and broadcast, for the relay against bare ws, interleaved window by window like the
 * compare section. Here the per-byte work dominates: unmasking what clients send (bufferutil
 * when it loads), the relay's byte scan of the payload, and the copy into each receiver's frame.
 */
import { measureThroughput, startAll, stopAll } from '../measure.ts';
import type { BenchOptions } from '../options.ts';
import type { Processes } from '../processes.ts';
import { type ServerKind, serverNames } from '../protocol.ts';
import { has, med, medianWithSpread, print, record } from '../stats.ts';

const kibibyte = 1024;
/** Payload sizes measured. */
export const payloadSizes = [kibibyte, 64 * kibibyte, 512 * kibibyte];
const modes = ['direct', 'broadcast'] as const;
/** 10 rooms of 4: enough to keep the server busy, few enough that 512 KiB messages fit in memory. */
const connections = 40;
/** Bytes each device keeps in flight (at least one message, at most 64 like the compare section). */
const inFlightBytes = 128 * kibibyte;

const label = (bytes: number) => `${bytes / kibibyte} KiB`;
const key = (kind: ServerKind, bytes: number, mode: string) => `${kind}.payload${bytes}.${mode}.us`;

function comparedKinds(options: BenchOptions): ServerKind[] {
  return options.kinds.filter((kind) => kind === 'relay' || kind === 'ws');
}

/** Measured windows per server, size and mode in a round (after one warm-up window). */
function windowsOf(options: BenchOptions): number {
  return Math.ceil(options.plan.windows / 2);
}

async function payloadRound(options: BenchOptions, procs: Processes, round: number) {
  const { plan } = options;
  const up = await startAll(procs, comparedKinds(options), connections);
  const windows = windowsOf(options);
  for (const payloadBytes of payloadSizes) {
    const window = Math.max(1, Math.min(64, Math.floor(inFlightBytes / payloadBytes)));
    for (const mode of modes) {
      for (let w = 0; w <= windows; w++) {
        process.stderr.write(
          `payloads ${round}/${plan.rounds}: ${label(payloadBytes)} ${mode} window ${w}/${windows}\n`,
        );
        for (const { kind, server } of up) {
          const result = await measureThroughput(procs, plan, server, procs.load(kind), {
            mode,
            window,
            payloadBytes,
          });
          if (w > 0) record(key(kind, payloadBytes, mode), result.usPerMessage);
        }
      }
    }
  }
  await stopAll(procs, up);
}

export async function runPayloads(options: BenchOptions, procs: Processes): Promise<void> {
  for (let round = 1; round <= options.plan.rounds; round++) {
    await payloadRound(options, procs, round);
  }
}

export function reportPayloads(options: BenchOptions, bufferUtil: string): void {
  const kinds = comparedKinds(options);
  print();
  print(
    `| large payloads: server CPU µs per delivered message (bufferutil ${bufferUtil}) | ${kinds.map((k) => serverNames[k]).join(' | ')} | relay ÷ bare ws |`,
  );
  print(`|---|${kinds.map(() => '---|').join('')}---|`);
  for (const bytes of payloadSizes) {
    for (const mode of modes) {
      const relayKey = key('relay', bytes, mode);
      const wsKey = key('ws', bytes, mode);
      const ratio = has(relayKey) && has(wsKey) ? (med(relayKey) / med(wsKey)).toFixed(2) : '—';
      print(
        `| ${label(bytes)}, ${mode} | ${kinds.map((k) => medianWithSpread(key(k, bytes, mode), 2)).join(' | ')} | ${ratio} |`,
      );
    }
  }
  print(
    `Medians (min–max) over ${windowsOf(options)} windows × ${options.plan.rounds} rounds; ${connections} connections in rooms of 4, each keeping ${inFlightBytes / kibibyte} KiB (at least one message) in flight.`,
  );
}
