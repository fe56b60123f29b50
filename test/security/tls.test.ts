import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import StandaloneConnector from 'ioredis/built/connectors/StandaloneConnector';
import type { NetStream } from 'ioredis/built/types';
import { FireOnceGuard, FireOnceStoreUnavailable, fireOnce } from '../../src';
import { testPrefix } from '../support/redis';
import { asFailure, decoded, dispatchCounter, runActivity, settle } from '../support/bystander';
import { spawnRedisServer, type SpawnedRedis } from '../support/redis-server';

/** Make a CA, and a server and a client certificate signed by it, with the openssl CLI. */
function makeCertificates(dir: string) {
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const sign = (name: string, subject: string, extensions: string) => {
    openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subject);
    writeFileSync(join(dir, `${name}.ext`), extensions);
    openssl(
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      `${name}.crt`,
      '-days',
      '1',
      '-extfile',
      `${name}.ext`,
    );
  };
  try {
    openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '1', '-subj', '/CN=fire-once test CA');
    sign('server', '/CN=127.0.0.1', 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
    sign('client', '/CN=fire-once-worker', 'extendedKeyUsage=clientAuth\n');
  } catch (err) {
    throw new Error(
      `openssl failed; install it (Debian/Ubuntu: apt-get install -y openssl): ${(err as { stderr?: Buffer }).stderr?.toString() ?? String(err)}`,
    );
  }
  const read = (file: string) => readFileSync(join(dir, file));
  return { ca: read('ca.crt'), clientCert: read('client.crt'), clientKey: read('client.key'), file: (name: string) => join(dir, name) };
}

/**
 * ioredis's own connector, with an 'error' listener that stays on the socket. ioredis listens for a
 * socket's first 'error' only (`once`): a TLS socket whose handshake failed can emit a second one
 * (the server's alert, read after the certificate was refused), which then goes unhandled and ends
 * the process (redis/ioredis pull request 961, closed unmerged; seen once here in CI).
 * docs/deployment.md, "TLS", gives users the same.
 */
class QuietConnector extends StandaloneConnector {
  constructor(options: unknown) {
    super(options as ConstructorParameters<typeof StandaloneConnector>[0]);
  }

  override async connect(onError: Parameters<StandaloneConnector['connect']>[0]): Promise<NetStream> {
    const stream = await super.connect(onError);
    stream.on('error', () => undefined);
    return stream;
  }
}

// A redis-server listening on TLS only (--port 0), with certificates made by this test: the guard
// and a guarded activity work over rediss://, an untrusted server certificate is refused, and a
// server that requires client certificates accepts the worker's.
describe('security: TLS (rediss://)', () => {
  let srv: SpawnedRedis;
  let mutual: SpawnedRedis;
  let certs: ReturnType<typeof makeCertificates>;
  let admin: Redis;
  let prefix: string;
  const open: Redis[] = [];

  function connect(server: SpawnedRedis, tls: object): Redis {
    // A short disconnectTimeout: ioredis keeps a timer that long for a socket whose TLS handshake failed.
    const redis = new Redis(server.url, { tls, maxRetriesPerRequest: 1, disconnectTimeout: 100, Connector: QuietConnector });
    redis.on('error', () => undefined);
    open.push(redis);
    return redis;
  }

  let certDir: string;

  beforeAll(async () => {
    certDir = mkdtempSync(join(tmpdir(), 'fire-once-tls-'));
    certs = makeCertificates(certDir);
    const tlsArgs = (authClients: string) => [
      '--tls-cert-file',
      certs.file('server.crt'),
      '--tls-key-file',
      certs.file('server.key'),
      '--tls-ca-cert-file',
      certs.file('ca.crt'),
      '--tls-auth-clients',
      authClients,
    ];
    srv = await spawnRedisServer(tlsArgs('no'), { tls: true });
    mutual = await spawnRedisServer(tlsArgs('yes'), { tls: true });
    admin = connect(srv, { ca: certs.ca });
  });
  beforeEach(() => {
    prefix = testPrefix('tls');
  });
  afterAll(async () => {
    for (const redis of open) redis.disconnect();
    await srv?.stop();
    await mutual?.stop();
    rmSync(certDir, { recursive: true, force: true });
  });

  it('runs the guard and a guarded activity over rediss:// (one dispatch, then a fast-forward)', async () => {
    expect(srv.url).toMatch(/^rediss:\/\//);
    const guard = new FireOnceGuard({ redis: admin, keyPrefix: prefix });
    const counter = dispatchCounter(admin, prefix);
    const activities = {
      job: fireOnce(
        async (scope: string) => {
          await counter.hit();
          return `over TLS for ${scope}`;
        },
        { scope: ([scope]) => scope },
      ),
    };
    for (let i = 0; i < 2; i++) expect(decoded(await runActivity({ config: { guard }, activities, activityType: 'job', args: ['s'] }))).toBe('over TLS for s');
    expect(await counter.total()).toBe(1);
    expect(await admin.exists(guard.keys.artifact('s', 'job'))).toBe(1);
  });

  it('refuses a server certificate it cannot verify (no CA given): FireOnceStoreUnavailable, nothing dispatched', async () => {
    const untrusting = connect(srv, {});
    const errors: string[] = [];
    untrusting.on('error', (e: Error) => errors.push(e.message));
    const guard = new FireOnceGuard({ redis: untrusting, keyPrefix: prefix, storeTimeoutMs: 1_000 });
    const counter = dispatchCounter(admin, prefix);
    const activities = { job: fireOnce(async (scope: string) => (await counter.hit(), scope), { scope: ([scope]) => scope }) };
    const { error } = await settle(runActivity({ config: { guard }, activities, activityType: 'job', args: ['s'] }));
    expect(asFailure(error).type).toBe('FireOnceStoreUnavailable');
    expect(await counter.total()).toBe(0);
    expect(errors.join('\n')).toMatch(/self[- ]signed certificate|unable to verify|certificate/i);
  });

  it('plain redis:// to the TLS port fails closed (FireOnceStoreUnavailable)', async () => {
    const plaintext = new Redis(`redis://127.0.0.1:${srv.port}`, { maxRetriesPerRequest: 1, disconnectTimeout: 100 });
    plaintext.on('error', () => undefined);
    open.push(plaintext);
    const err = await new FireOnceGuard({ redis: plaintext, keyPrefix: prefix, storeTimeoutMs: 1_000 })
      .acquire({ scope: 's', step: 'x', jobType: 'x' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FireOnceStoreUnavailable);
  });

  it('works with mutual TLS (the server requires a client certificate) and fails closed without one', async () => {
    const withCert = connect(mutual, { ca: certs.ca, cert: certs.clientCert, key: certs.clientKey });
    const guard = new FireOnceGuard({ redis: withCert, keyPrefix: prefix });
    const outcome = await guard.acquire({ scope: 's', step: 'x', jobType: 'x' });
    expect(outcome.kind).toBe('acquired');
    const withoutCert = connect(mutual, { ca: certs.ca });
    const err = await new FireOnceGuard({ redis: withoutCert, keyPrefix: prefix, storeTimeoutMs: 1_000 })
      .acquire({ scope: 's', step: 'y', jobType: 'y' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FireOnceStoreUnavailable);
  });
});
