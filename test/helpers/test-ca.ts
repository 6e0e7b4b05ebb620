import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The files of a test certificate authority and of one server certificate it signed. */
export interface TestCertificates {
  /** The CA's certificate (what a client is given to trust). */
  ca: string;
  /** The server's certificate, for 127.0.0.1 and `localhost`. */
  cert: string;
  key: string;
}

/**
 * A CA and a certificate for 127.0.0.1 and `localhost` signed by it, made with openssl in `dir`
 * (the NATS client checks a certificate against `localhost` when its URL names an IP address).
 */
export function makeCertificates(dir: string): TestCertificates {
  const ca = join(dir, 'ca.pem');
  const caKey = join(dir, 'ca-key.pem');
  const cert = join(dir, 'server.pem');
  const key = join(dir, 'server-key.pem');
  const csr = join(dir, 'server.csr');
  const ext = join(dir, 'ext.cnf');
  const run = (args: string[]) => execFileSync('openssl', args, { stdio: 'ignore' });
  const newKey = ['-newkey', 'rsa:2048', '-nodes'];
  run(['req', '-x509', ...newKey, '-keyout', caKey, '-out', ca, '-days', '2', '-subj', '/CN=ca']);
  run(['req', ...newKey, '-keyout', key, '-out', csr, '-subj', '/CN=127.0.0.1']);
  writeFileSync(ext, 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  const sign = ['x509', '-req', '-in', csr, '-CA', ca, '-CAkey', caKey, '-CAcreateserial'];
  run([...sign, '-out', cert, '-days', '2', '-extfile', ext]);
  return { ca, cert, key };
}
