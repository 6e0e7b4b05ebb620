/**
 * Durable buffer: committed messages per second into SQLite for absent devices, counted in the
 * relay's database file itself (a second reader; WAL), from the first send to the last commit.
 */
import Database from 'better-sqlite3';
import { connect, release } from '../measure.ts';
import type { BenchOptions } from '../options.ts';
import { type LoadChild, type Processes, sleep } from '../processes.ts';
import type { LoadCommand } from '../protocol.ts';
import { med, print, record, spread, verdict } from '../stats.ts';

const roomsOfFour = 25;
const absentPerRoom = 3;
const commitDeadlineMs = 60_000;

async function bufferRound(procs: Processes, load: LoadChild, perSender: number): Promise<void> {
  const { server, url, dbPath } = await procs.startServer('relay');
  await connect(load, 'relay', url, roomsOfFour * 4);
  load.send({ kind: 'buffer', absentPerRoom, perSender } satisfies LoadCommand);
  await load.next('measuring');
  const t0 = performance.now();
  const db = new Database(dbPath as string, { readonly: true, fileMustExist: true });
  const count = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM bufferedMessages');
  const expected = roomsOfFour * perSender * absentPerRoom;
  let committed = 0;
  const deadline = t0 + commitDeadlineMs;
  while (committed < expected && performance.now() < deadline) {
    await sleep(20);
    committed = count.get()?.n ?? 0;
  }
  const seconds = (performance.now() - t0) / 1000;
  db.close();
  await load.next('sent');
  if (committed < expected)
    throw new Error(`buffer: ${committed} of ${expected} committed in 60 s`);
  record('buffer.rate', committed / seconds);
  await release(load);
  await procs.stopServer(server);
}

export async function runBuffer(options: BenchOptions, procs: Processes): Promise<void> {
  const { plan } = options;
  for (let round = 1; round <= plan.rounds; round++) {
    process.stderr.write(`durable buffer ${round}/${plan.rounds}\n`);
    await bufferRound(procs, procs.load('relay'), options.quick ? 1_000 : 3_000);
  }
}

export function reportBuffer(): void {
  print();
  print(
    `durable buffer: ${Math.round(med('buffer.rate')).toLocaleString('en')} messages/s committed to SQLite for absent devices (${spread('buffer.rate', 0)}; ${roomsOfFour} rooms, ${absentPerRoom} absent devices each, one live sender each, from the first send to the last commit)`,
  );
  verdict({
    name: 'durable buffer, messages/s',
    value: med('buffer.rate'),
    limit: 50_000,
    atMost: false,
    unit: '',
  });
}
