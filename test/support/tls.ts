import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

export const HOW_TO_GET_TLS = 'This test needs openssl and a redis-server built with TLS (Debian/Ubuntu: `apt-get install -y openssl redis-server`).';

/** A self-signed certificate's PEM files; the certificate is its own CA. */
export interface TestCertificate {
  readonly certFile: string;
  readonly keyFile: string;
}

/**
 * Make a one-day self-signed certificate in `dir` for `localhost` and `127.0.0.1` (a Redis
 * Cluster hands out node addresses as IPs). Clients trust it through `NODE_EXTRA_CA_CERTS` or
 * `tls: { ca }`. Throws saying how to get openssl when it cannot.
 */
export function makeCertificate(dir: string): TestCertificate {
  const certFile = join(dir, 'cert.pem');
  const keyFile = join(dir, 'key.pem');
  const made = spawnSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
      '-keyout',
      keyFile,
      '-out',
      certFile,
      '-days',
      '1',
    ],
    { encoding: 'utf8' },
  );
  if (made.status !== 0) throw new Error(`openssl could not make a certificate (${made.error?.message ?? made.stderr}). ${HOW_TO_GET_TLS}`);
  return { certFile, keyFile };
}
