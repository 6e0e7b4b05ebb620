/**
 * `npm run bench:hot-path`: the per-frame work of the relay's own code, in one process, without
 * sockets: what the relay does with a routed frame's bytes (recognise, validate the payload,
 * splice the outgoing frame) against what the bare-ws reference does with the same frame
 * (decode, `JSON.parse`, serialize, encode), and the token bucket's `take`. Interleaved, five
 * rounds of a million frames each; medians in ns per frame. The socket side (`ws` framing,
 * unmasking, `writev`) is the same for both and is measured by `npm run bench`.
 */
import { createTokenBucket } from '../server/relay/rate-limit.ts';
import { recogniseRouted, spliceRoutedFrame } from '../server/relay/routed-bytes.ts';

const payload = `{"op":"edit","doc":"bench","data":"${'x'.repeat(48)}"}`;
const frames = Array.from({ length: 1_000 }, (_, i) =>
  Buffer.from(`{"to":${(i % 4) + 1},"payload":${payload}}`),
);
// what the relay splices in: the sender's prefix and a room id as the auth service issues them
const head = Buffer.from('{"from":7,"to":');
const roomJson = JSON.stringify(`12.${'a'.repeat(32)}.${'b'.repeat(32)}`);
const roomMember = Buffer.from(`,"room":${roomJson}`);

function relayPath(data: Buffer): number {
  const routed = recogniseRouted(data);
  if (routed === undefined) throw new Error('not recognised');
  return spliceRoutedFrame(data, routed.toEnd, head, roomMember).length;
}

function bareWsPath(data: Buffer): number {
  const frame = JSON.parse(String(data)) as { to: unknown; payload: unknown };
  return Buffer.from(
    `{"from":7,"to":${JSON.stringify(frame.to)},"room":${roomJson},"payload":${JSON.stringify(frame.payload)}}`,
  ).length;
}

const bucket = createTokenBucket(1_000_000_000, 1_000_000_000);
const performanceNowBucket = createTokenBucket(1_000_000_000, 1_000_000_000, () =>
  performance.now(),
);

const cases: Record<string, (data: Buffer) => number> = {
  'relay: recognise + validate + splice': relayPath,
  'bare ws: decode + JSON.parse + serialize + encode': bareWsPath,
  'token bucket take, clock per turn': () => (bucket.take() ? 1 : 0),
  'token bucket take, performance.now() per frame': () => (performanceNowBucket.take() ? 1 : 0),
};

const results = new Map<string, number[]>();
let sink = 0;
for (let round = 0; round < 6; round++) {
  for (const [name, run] of Object.entries(cases)) {
    const started = process.hrtime.bigint();
    for (let k = 0; k < 1_000; k++) for (const frame of frames) sink += run(frame);
    const ns = Number(process.hrtime.bigint() - started) / 1_000_000;
    if (round === 0) continue; // warm-up
    results.set(name, [...(results.get(name) ?? []), ns]);
  }
}
const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1] ?? 0;
process.stdout.write(
  `| per frame (${payload.length}-byte payload), ns | median | min–max |\n|---|---|---|\n`,
);
for (const [name, values] of results) {
  process.stdout.write(
    `| ${name} | ${median(values).toFixed(0)} | ${Math.min(...values).toFixed(0)}–${Math.max(...values).toFixed(0)} |\n`,
  );
}
const relay = median(results.get('relay: recognise + validate + splice') ?? []);
const bare = median(results.get('bare ws: decode + JSON.parse + serialize + encode') ?? []);
process.stdout.write(
  `\nrelay ÷ bare ws, per frame: ${(relay / bare).toFixed(2)}× (checksum ${sink})\n`,
);
