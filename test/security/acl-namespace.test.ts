import { Redis } from 'ioredis';
import { FireOnceGuard } from '../../src';
import { FireOnceKeys } from '../../src/core';
import { testPrefix } from '../support/redis';
import { differences, seedBystander, snapshot } from '../support/bystander';
import { spawnRedisServer, type SpawnedRedis } from '../support/redis-server';
import { documentedAclLine, parseAclLog } from './acl-rules';
import { runWorkerScenario } from './worker-scenario';

// The per-namespace Redis user documented in docs/deployment.md (read from the file): a worker of
// namespace tenant-b works under it, and another namespace's keys, channels and log stay out of
// its reach, on the same Redis and key prefix.
describe('security: one Redis user per namespace', () => {
  const USER = 'fire-once-tenant-b';
  const NAMESPACE = 'tenant-b';
  const password = 'acl-namespace-password';
  let srv: SpawnedRedis;
  let admin: Redis;
  let prefix: string;

  /** The documented rules, with `fire-once` replaced by this test's prefix and the password set. */
  const rules = (p: string) =>
    documentedAclLine(USER, 'deployment.md')
      .split(' ')
      .slice(3)
      .map((rule) => (rule === '>CHANGE-ME' ? `>${password}` : rule.replace(/^(%R~|~|&)fire-once:/, `$1${p}:`)));
  const denials = async () => parseAclLog(await admin.call('ACL', 'LOG')).filter((d) => d.username === USER);

  beforeAll(async () => {
    srv = await spawnRedisServer();
    admin = new Redis(srv.url);
  });
  beforeEach(async () => {
    prefix = testPrefix('acl-ns');
    await admin.call('ACL', 'SETUSER', USER, ...rules(prefix));
    await admin.call('ACL', 'LOG', 'RESET');
  });
  afterAll(async () => {
    admin.disconnect();
    await srv.stop();
  });

  it('a worker of its namespace works with no denial, once an admin has set the protocol marker', async () => {
    await admin.set(`${prefix}:protocol`, '3');
    const report = await runWorkerScenario({ url: srv.url, username: USER, password, prefix, admin, namespace: NAMESPACE });
    expect(report).toMatchObject({ holder: { value: 'summary of s' }, waiter: { value: 'summary of s' }, rerun: { value: 'summary of s' }, dispatches: 4 });
    expect(await admin.xlen(new FireOnceKeys(prefix, NAMESPACE).log())).toBeGreaterThan(0);
    expect(await denials()).toEqual([]);
  });

  it('refuses to start while the protocol marker is unset, since it may not write it', async () => {
    const err = await runWorkerScenario({ url: srv.url, username: USER, password, prefix, admin, namespace: NAMESPACE }).catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/has no protocol marker .* and this Redis user may not write it/);
  });

  it("another namespace's keys, channels and log are out of reach, and its artifact stays intact", async () => {
    const otherGuard = new FireOnceGuard({ redis: admin, keyPrefix: prefix }); // namespace default
    await seedBystander(otherGuard);
    const before = await snapshot(admin, prefix);
    const keys = otherGuard.keys;
    const artifact = keys.artifact('bystander', 'report');
    const tenant = new Redis(srv.url, { username: USER, password, maxRetriesPerRequest: 1 });
    tenant.on('error', () => undefined);
    const subscriber = tenant.duplicate();
    try {
      const attempts: Record<string, () => Promise<unknown>> = {
        "GET default's artifact": () => tenant.get(artifact),
        "DEL default's artifact": () => tenant.del(artifact),
        "EVAL on default's artifact": () => tenant.eval("return redis.call('GET', KEYS[1])", 1, artifact),
        "XADD to default's dispatch log": () => tenant.xadd(keys.log(), '*', 'decision', 'dispatched'),
        "SUBSCRIBE to default's wake channel": () => subscriber.subscribe(keys.wakeChannel('bystander')),
        "PUBLISH on default's invalidations": () => tenant.publish(keys.invalidations(), artifact),
        'SET the protocol marker': () => tenant.set(`${prefix}:protocol`, '4'),
        'DEL the protocol marker': () => tenant.del(`${prefix}:protocol`),
        "XRANGE default's dispatch log": () => tenant.xrange(keys.log(), '-', '+'),
        "DEL default's dispatch log": () => tenant.del(keys.log()),
        "GET default's lock": () => tenant.get(keys.lock('bystander', 'report')),
        "SUBSCRIBE to default's invalidations": () => subscriber.subscribe(keys.invalidations()),
        'PSUBSCRIBE to every wake channel': () => subscriber.psubscribe(`${prefix}:v3:*`),
      };
      const outcomes: Record<string, string> = {};
      for (const [name, attempt] of Object.entries(attempts)) {
        outcomes[name] = await attempt().then(
          (value) => `allowed: ${JSON.stringify(value)}`,
          (err: Error) => (/^NOPERM|script can't access|script can't run/.test(err.message) ? 'denied' : err.message),
        );
      }
      expect(outcomes).toEqual(Object.fromEntries(Object.keys(attempts).map((name) => [name, 'denied'])));
      // Through the guard too: a tenant-b guard asking for default's scope is refused, nothing written.
      const guarded = await new FireOnceGuard({ redis: tenant, keyPrefix: prefix })
        .acquire({ scope: 'bystander', step: 'report', jobType: 'report' })
        .catch((e: unknown) => e);
      expect((guarded as Error).message).toMatch(/NOPERM/);
    } finally {
      tenant.disconnect();
      subscriber.disconnect();
    }
    expect(await differences(admin, before)).toEqual([]);
  });
});
