import { createServer, type AddressInfo, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import { FireOnceConfigError, FireOnceStoreUnavailable } from '../../../src';
import { checkEvictionPolicy, readEvictionPolicies } from '../../../src/core';
import { spawnRedisServer, type SpawnedRedis } from '../../support/redis-server';
import { ACL_USER, aclRules, parseAclLog } from '../../security/acl-rules';

// The eviction policy check, against redis-servers spawned with each policy: every policy but
// noeviction is refused with a FireOnceConfigError that says what to set; INFO is read first and
// CONFIG GET is the fallback; a policy nobody can read is refused too; the opt-out warns once.
describe('checkEvictionPolicy', () => {
  const servers: SpawnedRedis[] = [];
  const clients: Redis[] = [];
  const spawn = async (...args: string[]) => {
    const server = await spawnRedisServer(args);
    servers.push(server);
    return server;
  };
  // Where INFO is renamed away, ioredis's ready check (an INFO) must be off for the client to work at all.
  const connect = (url: string, options: { username?: string; password?: string; enableReadyCheck?: boolean } = {}) => {
    const client = new Redis(url, { maxRetriesPerRequest: 1, ...options });
    client.on('error', () => undefined);
    clients.push(client);
    return client;
  };
  const refusal = (redis: Redis) =>
    checkEvictionPolicy(redis).then(
      () => undefined,
      (err: unknown) => err,
    );

  afterAll(async () => {
    for (const client of clients) client.disconnect();
    await Promise.all(servers.map((s) => s.stop()));
  });

  it('accepts noeviction, read from INFO memory', async () => {
    const server = await spawn('--maxmemory-policy', 'noeviction');
    const [policy] = await checkEvictionPolicy(connect(server.url));
    expect(policy).toEqual({ address: `127.0.0.1:${server.port}`, policy: 'noeviction', source: 'INFO', safe: true });
  });

  it.each(['volatile-lru', 'volatile-lfu', 'volatile-ttl', 'volatile-random', 'allkeys-lru', 'allkeys-lfu', 'allkeys-random'])(
    'refuses %s with a FireOnceConfigError that says to set maxmemory-policy noeviction',
    async (policy) => {
      const server = await spawn('--maxmemory-policy', policy);
      const err = await refusal(connect(server.url));
      expect(err).toBeInstanceOf(FireOnceConfigError);
      expect((err as FireOnceConfigError).type).toBe('FireOnceConfigError');
      expect((err as Error).message).toContain(`Redis at 127.0.0.1:${server.port} has maxmemory-policy ${policy}`);
      expect((err as Error).message).toContain('Set `maxmemory-policy noeviction`');
      expect((err as Error).message).toContain('allowEvictingRedis: true');
    },
  );

  it('falls back to CONFIG GET where INFO is renamed away, and reads INFO where CONFIG is', async () => {
    const noInfo = await spawn('--maxmemory-policy', 'volatile-lru', '--rename-command', 'INFO', '');
    const client = connect(noInfo.url, { enableReadyCheck: false });
    expect(await readEvictionPolicies(client)).toEqual([{ address: `127.0.0.1:${noInfo.port}`, policy: 'volatile-lru', source: 'CONFIG GET', safe: false }]);
    expect(await refusal(client)).toBeInstanceOf(FireOnceConfigError);
    const noConfig = await spawn('--maxmemory-policy', 'allkeys-lru', '--rename-command', 'CONFIG', '');
    const [read] = await readEvictionPolicies(connect(noConfig.url));
    expect(read).toMatchObject({ policy: 'allkeys-lru', source: 'INFO', safe: false });
  });

  it('refuses a policy that neither INFO nor CONFIG GET can read, saying why', async () => {
    const server = await spawn('--maxmemory-policy', 'noeviction', '--rename-command', 'INFO', '', '--rename-command', 'CONFIG', '');
    const err = await refusal(connect(server.url, { enableReadyCheck: false }));
    expect(err).toBeInstanceOf(FireOnceConfigError);
    expect((err as Error).message).toMatch(
      /maxmemory-policy of Redis at 127\.0\.0\.1:\d+ could not be read \(INFO memory: ERR unknown command 'info'.*CONFIG GET maxmemory-policy: ERR unknown command 'config'.*check it by hand\)/i,
    );
  });

  describe('as an ACL user', () => {
    let server: SpawnedRedis;
    let admin: Redis;
    beforeAll(async () => {
      server = await spawn('--maxmemory-policy', 'volatile-ttl');
      admin = connect(server.url);
    });
    const denials = async (user: string) => parseAclLog(await admin.call('ACL', 'LOG')).filter((d) => d.username === user);

    it('with the documented least-privilege ACL (+info): reads the policy from INFO, and ACL LOG records no denial', async () => {
      await admin.call('ACL', 'SETUSER', ACL_USER, ...aclRules('acl-eviction', 'pw'));
      await admin.call('ACL', 'LOG', 'RESET');
      const err = await refusal(connect(server.url, { username: ACL_USER, password: 'pw' }));
      expect((err as Error).message).toContain('has maxmemory-policy volatile-ttl');
      expect(await denials(ACL_USER)).toEqual([]);
    });

    it('without +info (and no CONFIG): refused as unreadable, naming the NOPERM; the opt-out warns once and goes on', async () => {
      await admin.call('ACL', 'SETUSER', 'no-info', 'reset', 'on', '>pw', '~acl-eviction:*', '+evalsha', '+eval');
      const redis = connect(server.url, { username: 'no-info', password: 'pw' });
      const err = await refusal(redis);
      expect(err).toBeInstanceOf(FireOnceConfigError);
      expect((err as Error).message).toMatch(/could not be read \(INFO memory: NOPERM.*CONFIG GET maxmemory-policy: NOPERM.*grant the user \+info/);

      const warnings: [string, Record<string, unknown>][] = [];
      const policies = await checkEvictionPolicy(redis, { allowEvictingRedis: true, warn: (message, meta) => warnings.push([message, meta]) });
      expect(policies).toMatchObject([{ policy: undefined, safe: false }]);
      expect(warnings).toHaveLength(1);
      expect(warnings[0][0]).toMatch(/could not be read.*starting anyway because allowEvictingRedis is true/);
      expect(warnings[0][1]).toEqual({ nodes: [{ address: `127.0.0.1:${server.port}`, policy: 'unknown' }] });
    });
  });

  it('with the opt-out, an evicting policy is reported once through warn, and the check resolves', async () => {
    const server = await spawn('--maxmemory-policy', 'allkeys-lru');
    const warnings: string[] = [];
    const policies = await checkEvictionPolicy(connect(server.url), { allowEvictingRedis: true, warn: (message) => warnings.push(message) });
    expect(policies).toMatchObject([{ policy: 'allkeys-lru', safe: false }]);
    expect(warnings).toEqual([expect.stringContaining(`Redis at 127.0.0.1:${server.port} has maxmemory-policy allkeys-lru`)]);
  });

  it('fails closed with FireOnceStoreUnavailable when Redis cannot be reached within timeoutMs', async () => {
    // A listener of this test's own that accepts and never answers: a port merely found free could
    // be taken meanwhile by another file's redis-server, which would answer.
    const sockets: Socket[] = [];
    const silent = createServer((socket) => void sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const redis = new Redis((silent.address() as AddressInfo).port, '127.0.0.1', { lazyConnect: true, retryStrategy: () => 100 });
    redis.on('error', () => undefined);
    try {
      const err = await checkEvictionPolicy(redis, { timeoutMs: 500 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(FireOnceStoreUnavailable);
      expect((err as Error).message).toMatch(/did not answer within 500 ms|could not read Redis's eviction policy/);
    } finally {
      redis.disconnect();
      sockets.forEach((socket) => socket.destroy());
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});
