/**
 * `npx tsx bench/profile-summary.ts bench/profiles/relay-broadcast-64-1.cpuprofile [rows]`:
 * self time per function of a CPU profile written by `BENCH_CPU_PROF=<kind>`, busiest first, as
 * a share of the busy (not idle) time. Compare a relay window with the same window of bare ws.
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const [file, rowsArg] = process.argv.slice(2);
if (file === undefined) {
  process.stderr.write('usage: tsx bench/profile-summary.ts <file.cpuprofile> [rows]\n');
  process.exit(2);
}
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
const selfMicros = new Map<string, number>();
let total = 0;
profile.samples.forEach((id, i) => {
  const frame = nodes.get(id)?.callFrame;
  const where = frame === undefined ? '?' : frame.url.split('/').slice(-2).join('/');
  const key = `${frame?.functionName || '(anonymous)'} ${where}:${(frame?.lineNumber ?? -1) + 1}`;
  const delta = profile.timeDeltas[i] ?? 0;
  selfMicros.set(key, (selfMicros.get(key) ?? 0) + delta);
  total += delta;
});
const idle = [...selfMicros].reduce(
  (sum, [key, us]) => (key.startsWith('(idle)') ? sum + us : sum),
  0,
);
const busy = total - idle;
process.stdout.write(
  `${file}: ${(total / 1000).toFixed(0)} ms sampled, ${(busy / 1000).toFixed(0)} ms busy\n`,
);
const rows = [...selfMicros]
  .filter(([key]) => !key.startsWith('(idle)'))
  .sort((a, b) => b[1] - a[1])
  .slice(0, Number(rowsArg ?? 30));
for (const [key, us] of rows) {
  process.stdout.write(
    `${(us / 1000).toFixed(1).padStart(8)} ms ${((100 * us) / busy).toFixed(1).padStart(5)} %  ${key}\n`,
  );
}
