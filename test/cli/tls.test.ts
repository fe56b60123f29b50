import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { spawnRedisServer, type SpawnedRedis } from '../support/redis-server';
import { HOW_TO_GET_TLS, makeCertificate } from '../support/tls';
import { runCli } from './run-cli';
import { FireOnceKeys } from '../../src/core';
import { writeLock } from '../support/records';

// `rediss://` end to end: a redis-server of this test's own with TLS only, a certificate made for
// it, and the CLI trusting it through NODE_EXTRA_CA_CERTS. The report reads through both of the
// CLI's connections (ioredis, and the raw reader of the log), so both must speak TLS.
// Spawns CLI processes (and, for the demo, a worker and a Temporal bundle); slow on a loaded 2-core machine.
jest.setTimeout(300_000);

describe('fire-once CLI over TLS (rediss://)', () => {
  let dir: string;
  let certFile: string;
  let server: SpawnedRedis | undefined;
  let port: number;
  let redis: Redis | undefined;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fire-once-cli-tls-'));
    const cert = makeCertificate(dir);
    certFile = cert.certFile;
    try {
      server = await spawnRedisServer(
        ['--tls-cert-file', certFile, '--tls-key-file', cert.keyFile, '--tls-ca-cert-file', certFile, '--tls-auth-clients', 'no'],
        { tls: true },
      );
    } catch (err) {
      throw new Error(`${(err as Error).message}\nIs redis-server built with TLS? ${HOW_TO_GET_TLS}`);
    }
    port = server.port;
    redis = new Redis({ host: 'localhost', port, tls: { ca: readFileSync(certFile) }, maxRetriesPerRequest: 0 });
    await redis.ping();
  });

  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('reports, inspects and releases over rediss://', async () => {
    const keys = new FireOnceKeys('tls');
    for (const workflowId of ['wf-1', 'wf-2']) {
      await redis!.xadd(keys.log(), '*', 'decision', 'dispatched', 'scope', 's', 'step', 'x', 'jobType', 'j', 'workflowId', workflowId);
    }
    await writeLock(redis!, keys.lock('s', 'x'), 'token', { holder: 'wf-1 run-1 1' });
    const env = { NODE_EXTRA_CA_CERTS: certFile };
    const url = `rediss://localhost:${port}`;

    const report = await runCli(['report', '--prefix', 'tls', '--redis', url, '--json'], env);
    expect(report.stderr).toBe('');
    expect(report.code).toBe(1);
    expect(JSON.parse(report.stdout)).toMatchObject({ events: 2, duplicates: [{ scope: 's', dispatches: [{ workflowId: 'wf-1' }, { workflowId: 'wf-2' }] }] });

    const inspect = await runCli(['inspect', 's', '--prefix', 'tls', '--redis', url], env);
    expect(inspect.code).toBe(0);
    expect(inspect.stdout).toContain('wf-1 run-1 1');

    const release = await runCli(['release', 's', '--step', 'x', '--prefix', 'tls', '--redis', url, '--force'], env);
    expect(release.code).toBe(0);
    expect(await redis!.exists(keys.lock('s', 'x'))).toBe(0);

    // Without the CA the certificate is refused: exit 3, not a plaintext fallback.
    const untrusted = await runCli(['report', '--prefix', 'tls', '--redis', url]);
    expect(untrusted.code).toBe(3);
  });
});
