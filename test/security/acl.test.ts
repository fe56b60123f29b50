import { Redis } from 'ioredis';
import { FireOnceGuard, FireOnceStoreUnavailable } from '../../src';
import { FireOnceKeys } from '../../src/core';
import { testPrefix } from '../support/redis';
import { differences, seedBystander, snapshot } from '../support/bystander';
import { spawnRedisServer, type SpawnedRedis } from '../support/redis-server';
import { ACL_USER, aclRules, grantedCommands, parseAclLog, type AclDenial } from './acl-rules';
import { runWorkerScenario } from './worker-scenario';

// The least-privilege ACL documented in docs/reliability.md (read from the file, so the two cannot
// drift), on a redis-server of this test's own: a worker works under it, every granted command is
// needed, and another tenant's keys and channels are out of reach.
describe('security: least-privilege Redis ACL', () => {
  let srv: SpawnedRedis;
  let admin: Redis;
  let tenant: string;
  let other: string;
  const password = 'acl-test-password';

  beforeAll(async () => {
    srv = await spawnRedisServer();
    admin = new Redis(srv.url);
  });
  beforeEach(async () => {
    tenant = testPrefix('tenant-a');
    other = testPrefix('tenant-b');
    await admin.call('ACL', 'SETUSER', ACL_USER, ...aclRules(tenant, password));
    await admin.call('ACL', 'LOG', 'RESET');
  });
  afterAll(async () => {
    admin.disconnect();
    await srv.stop();
  });

  const denials = async (): Promise<AclDenial[]> => parseAclLog(await admin.call('ACL', 'LOG')).filter((d) => d.username === ACL_USER);

  function restricted(): Redis {
    const redis = new Redis(srv.url, { username: ACL_USER, password, maxRetriesPerRequest: 1 });
    redis.on('error', () => undefined);
    return redis;
  }

  it('a plugin-run worker (guard, lease renewal, wake-ups, dispatch log, local cache, invalidation, external artifact) works with no denial', async () => {
    const report = await runWorkerScenario({ url: srv.url, username: ACL_USER, password, prefix: tenant, admin });
    expect(report).toEqual({
      holder: { value: 'summary of s' },
      waiter: { value: 'summary of s' }, // fast-forwarded: one dispatch for two invocations
      parked: { value: 'summary of s' }, // parked, then completed by the holder's commit
      failing: { error: 'Error: the job failed' },
      external: { value: undefined },
      renewed: true,
      wakeSubscribers: 1,
      invalidationSubscribers: 1,
      invalidated: { value: true },
      rerun: { value: 'summary of s' }, // dispatched again once the result was invalidated
      lockAfterFailure: 0,
      dispatches: 4,
    });
    expect(await admin.xlen(new FireOnceKeys(tenant).log())).toBeGreaterThan(0); // the dispatch log was written
    expect(await denials()).toEqual([]);
  });

  it('the core guard alone (acquire, held, extend, commit, fast-forward, release) works with no denial', async () => {
    const redis = restricted();
    try {
      const guard = new FireOnceGuard({ redis, keyPrefix: tenant });
      const target = { scope: 'session-1', step: 'dispatch', jobType: 'summary' };
      const first = await guard.acquire(target);
      if (first.kind !== 'acquired') throw new Error(`expected to acquire, got ${first.kind}`);
      expect((await guard.acquire(target)).kind).toBe('held');
      expect(await guard.extend(first.lease, 60_000)).toBe(true);
      expect((await guard.commit(first.lease, Buffer.from('result'))).ours).toBe(true);
      expect((await guard.acquire(target)).kind).toBe('fast-forward');
      const other = await guard.acquire({ ...target, step: 'other', jobType: 'other' });
      if (other.kind !== 'acquired') throw new Error('expected to acquire');
      expect((await guard.release(other.lease)).ours).toBe(true);
      expect(await guard.invalidate(target.scope, target.jobType)).toBe(true);
      expect((await guard.acquire(target)).kind).toBe('acquired'); // replaces the committed lock
    } finally {
      redis.disconnect();
    }
    expect(await denials()).toEqual([]);
  });

  it.each(grantedCommands())('every granted command is needed: without +%s the worker is denied it', async (command) => {
    await admin.call('ACL', 'SETUSER', ACL_USER, `-${command}`);
    await admin.script('FLUSH'); // as after a restart or failover: ioredis must fall back from EVALSHA to EVAL
    await runWorkerScenario({ url: srv.url, username: ACL_USER, password, prefix: tenant, admin }).catch(() => undefined);
    expect((await denials()).map((d) => d.object)).toContain(command);
  });

  it("another tenant's keys, channels and the keyspace at large are out of reach (NOPERM), and its artifact stays intact", async () => {
    const otherGuard = new FireOnceGuard({ redis: admin, keyPrefix: other });
    await seedBystander(otherGuard);
    const before = await snapshot(admin, other);
    const [artifactKey] = [...before.keys()].filter((k) => otherGuard.keys.parse(k)?.kind === 'artifact');
    const redis = restricted();
    const subscriber = restricted();
    try {
      const attempts: Record<string, () => Promise<unknown>> = {
        'GET its artifact': () => redis.get(artifactKey),
        'DEL its artifact': () => redis.del(artifactKey),
        'EVAL with its key declared': () => redis.eval("return redis.call('GET', KEYS[1])", 1, artifactKey),
        'EVAL with its key undeclared': () => redis.eval(`return redis.call('DEL', '${artifactKey}')`, 0),
        'SUBSCRIBE to its wake channel': () => subscriber.subscribe(otherGuard.keys.wakeChannel('bystander')),
        'PUBLISH on its invalidation channel': () => redis.publish(otherGuard.keys.invalidations(), artifactKey),
        'SCAN the keyspace': () => redis.scan('0', 'MATCH', '*'),
        'KEYS *': () => redis.keys('*'),
        FLUSHALL: () => redis.flushall(),
        'CONFIG GET': () => redis.config('GET', 'requirepass'),
      };
      const outcomes: Record<string, string> = {};
      for (const [name, attempt] of Object.entries(attempts)) {
        outcomes[name] = await attempt().then(
          (value) => `allowed: ${JSON.stringify(value)}`,
          (err: Error) => (/^NOPERM|script can't access|script can't run/.test(err.message) ? 'denied' : err.message),
        );
      }
      expect(outcomes).toEqual(Object.fromEntries(Object.keys(attempts).map((name) => [name, 'denied'])));

      const guarded = await new FireOnceGuard({ redis, keyPrefix: other })
        .acquire({ scope: 'bystander', step: 'report', jobType: 'report' })
        .catch((e: unknown) => e);
      expect(guarded).toBeInstanceOf(FireOnceStoreUnavailable);
      expect((guarded as Error).message).toMatch(/NOPERM/);
      const external = await new FireOnceGuard({ redis, keyPrefix: tenant })
        .acquire({ scope: 's', step: 'dispatch', jobType: 'job', externalArtifactKey: artifactKey })
        .catch((e: unknown) => e);
      expect(external).toBeInstanceOf(FireOnceStoreUnavailable);
      expect((external as Error).message).toMatch(/NOPERM/);
    } finally {
      redis.disconnect();
      subscriber.disconnect();
    }
    expect(await differences(admin, before)).toEqual([]);
  });
});
