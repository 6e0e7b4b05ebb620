// Generates the app and tray icons (PNG) in build/icons/ without any image tool:
// `npx tsx build/make-icons.ts`. The output is committed; run it again only to change the design.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';

const out = join(import.meta.dirname, 'icons');

const crcTable = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(bytes: Buffer): number {
  let c = 0xffffffff;
  for (const b of bytes) c = (crcTable[(c ^ b) & 0xff] ?? 0) ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type: string, data: Buffer): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([len, body, crc]);
}

/** An RGBA PNG from a pixel function returning [r, g, b, a] (0-255). */
function png(
  size: number,
  pixel: (x: number, y: number) => [number, number, number, number],
): Buffer {
  const raw = Buffer.alloc(size * (size * 4 + 1));
  for (let y = 0; y < size; y++) {
    raw[y * (size * 4 + 1)] = 0;
    for (let x = 0; x < size; x++) {
      const [r, g, b, a] = pixel(x, y);
      raw.set([r, g, b, a], y * (size * 4 + 1) + 1 + x * 4);
    }
  }
  const header = Buffer.alloc(13);
  header.writeUInt32BE(size, 0);
  header.writeUInt32BE(size, 4);
  header.set([8, 6, 0, 0, 0], 8);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(raw, { level: 9 })),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** Coverage (0..1) of the design at a point in unit coordinates: which layer it belongs to. */
function layers(u: number, v: number): { square: boolean; mark: boolean } {
  const r = 0.2;
  const dx = Math.max(Math.abs(u - 0.5) - (0.5 - r), 0);
  const dy = Math.max(Math.abs(v - 0.5) - (0.5 - r), 0);
  const square = dx * dx + dy * dy <= r * r;
  const d = Math.hypot(u - 0.5, v - 0.5);
  const angle = Math.atan2(v - 0.5, u - 0.5);
  // A ring with two gaps (two arrows chasing each other), and a centre dot: devices in sync.
  const gap = Math.abs(Math.sin(angle)) < 0.28 && d > 0.2;
  const ring = d > 0.24 && d < 0.33 && !gap;
  const heads = [
    [0.5 + 0.285, 0.5 - 0.06],
    [0.5 - 0.285, 0.5 + 0.06],
  ].some(([hx, hy]) => Math.hypot(u - (hx ?? 0), v - (hy ?? 0)) < 0.075);
  const dot = d < 0.09;
  return { square, mark: ring || heads || dot };
}

function render(size: number, mode: 'app' | 'tray' | 'template'): Buffer {
  const samples = 4;
  return png(size, (x, y) => {
    let square = 0;
    let mark = 0;
    for (let sy = 0; sy < samples; sy++) {
      for (let sx = 0; sx < samples; sx++) {
        const l = layers((x + (sx + 0.5) / samples) / size, (y + (sy + 0.5) / samples) / size);
        if (l.square) square++;
        if (l.mark && (mode !== 'app' || l.square)) mark++;
      }
    }
    const n = samples * samples;
    if (mode === 'template') return [0, 0, 0, Math.round((255 * mark) / n)];
    if (mode === 'tray') {
      const a = Math.max(square, mark) / n;
      const m = mark / Math.max(1, Math.max(square, mark));
      return [
        Math.round(36 + (255 - 36) * m),
        Math.round(87 + (255 - 87) * m),
        Math.round(214 + (255 - 214) * m),
        Math.round(255 * a),
      ];
    }
    const m = mark / Math.max(1, square);
    return [
      Math.round(36 + 219 * m),
      Math.round(87 + 168 * m),
      Math.round(214 + 41 * m),
      Math.round((255 * square) / n),
    ];
  });
}

mkdirSync(join(out, 'linux'), { recursive: true });
writeFileSync(join(out, 'icon.png'), render(1024, 'app'));
for (const size of [16, 32, 48, 64, 128, 256, 512])
  writeFileSync(join(out, 'linux', `${size}x${size}.png`), render(size, 'app'));
writeFileSync(join(out, 'tray.png'), render(32, 'tray'));
writeFileSync(join(out, 'trayTemplate.png'), render(22, 'template'));
writeFileSync(join(out, 'trayTemplate@2x.png'), render(44, 'template'));
process.stdout.write(`icons written to ${out}\n`);
