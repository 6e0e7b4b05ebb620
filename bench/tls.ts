/**
 * `BENCH_TLS=1`: the benchmarked servers speak TLS (wss://) with one self-signed ECDSA P-256
 * certificate, made once per bench run in a temporary folder: the relay through its own TLS
 * port (server/tls), the bare-ws reference on a plain `https.createServer`. The load generator
 * accepts that certificate.
 */
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSecureContext } from 'node:tls';
import { type CertificatePair, ensureSelfSigned } from '../server/tls/certificate.ts';
import type { TlsContextSource } from '../server/tls/secure-port.ts';

export const benchTls = process.env.BENCH_TLS === '1';

/** The bench's certificate (the same for every server process of a run on this machine). */
export async function benchCertificate(): Promise<CertificatePair & TlsContextSource> {
  const dir = join(tmpdir(), 'sync-host-bench-tls');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const pair = await ensureSelfSigned(dir, ['localhost', '127.0.0.1'], Date.now());
  const context = createSecureContext({ cert: pair.cert, key: pair.key });
  return { ...pair, context: () => context };
}
