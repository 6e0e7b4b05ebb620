/**
 * `npm run bench:unmask`: what the optional `bufferutil` package saves per received frame. Every
 * frame a client sends is masked, and `ws` unmasks it on the server with `bufferutil`'s native
 * code when the package loads, else with a JavaScript loop (the loop below is `ws`'s own
 * fallback). Both run in this one process, alternating, ten measured rounds per payload size;
 * medians in µs per frame.
 */
import { createRequire } from 'node:module';

interface BufferUtil {
  unmask(buffer: Buffer, mask: Buffer): void;
}

const bufferUtil = createRequire(import.meta.url)('bufferutil') as BufferUtil;

/** `ws`'s fallback when `bufferutil` is missing (lib/buffer-util.js, `_unmask`). */
function unmaskInJavaScript(buffer: Buffer, mask: Buffer): void {
  for (let i = 0; i < buffer.length; i++)
    buffer[i] = (buffer[i] as number) ^ (mask[i & 3] as number);
}

const mask = Buffer.from([0x12, 0x34, 0x56, 0x78]);
const sizes = [1024, 64 * 1024, 512 * 1024];
/** Bytes unmasked per measured round and way, whatever the frame size. */
const bytesPerRound = 64 * 1024 * 1024;
const rounds = 11;

const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1] ?? 0;

process.stdout.write(
  '| payload | ws without bufferutil, µs | with bufferutil, µs | saved per frame, µs | ratio |\n|---|---|---|---|---|\n',
);
for (const size of sizes) {
  const frame = Buffer.alloc(size, 0x61);
  const repeats = bytesPerRound / size;
  const times: Record<'js' | 'native', number[]> = { js: [], native: [] };
  const ways: ['js' | 'native', (b: Buffer, m: Buffer) => void][] = [
    ['js', unmaskInJavaScript],
    ['native', (b, m) => bufferUtil.unmask(b, m)],
  ];
  for (let round = 0; round < rounds; round++) {
    for (const [name, unmask] of round % 2 === 0 ? ways : [...ways].reverse()) {
      const started = process.hrtime.bigint();
      for (let k = 0; k < repeats; k++) unmask(frame, mask);
      const microseconds = Number(process.hrtime.bigint() - started) / 1000 / repeats;
      if (round > 0) times[name].push(microseconds); // the first round warms up
    }
  }
  const js = median(times.js);
  const native = median(times.native);
  const label = size >= 1024 * 1024 ? `${size / 1024 / 1024} MiB` : `${size / 1024} KiB`;
  process.stdout.write(
    `| ${label} | ${js.toFixed(1)} | ${native.toFixed(1)} | ${(js - native).toFixed(1)} | ${(js / native).toFixed(0)}× |\n`,
  );
}
