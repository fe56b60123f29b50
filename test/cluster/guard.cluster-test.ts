import { randomUUID } from 'node:crypto';
import { Cluster } from 'ioredis';
import { FireOnceGuard, FireOnceStoreUnavailable, type AcquireOutcome, type Lease } from '../../src';
import { startRenewal } from '../../src/core';
import { testPrefix } from '../support/redis';
import { connectCluster, deletePrefixOnCluster, masters } from '../support/cluster/cluster';
import { lockToken, writeLock } from '../support/records';

// The core guard with an ioredis Cluster as its client, on a real 3-master Redis Cluster: the
// same guarantees as test/core/guard.test.ts, plus what only a cluster can break (keys of many
// scopes spread over several masters, per-node script caches).
describe('FireOnceGuard on a Redis Cluster', () => {
  let cluster: Cluster;
  let prefix: string;
  let guard: FireOnceGuard;
  const target = { scope: 'session-1', step: 'dispatch', jobType: 'summary' };

  const acquired = (outcome: AcquireOutcome): Lease => {
    if (outcome.kind !== 'acquired') throw new Error(`expected acquired, got ${outcome.kind}`);
    return outcome.lease;
  };

  beforeAll(() => {
    cluster = connectCluster();
  });
  beforeEach(() => {
    prefix = testPrefix('cguard');
    guard = new FireOnceGuard({ redis: cluster, keyPrefix: prefix, lockTtlMs: 30_000, artifactTtlMs: 60_000 });
  });
  afterEach(() => deletePrefixOnCluster(cluster, prefix));
  afterAll(() => cluster.quit());

  it('runs on a healthy cluster of at least 3 masters with every slot assigned', async () => {
    const info = (await cluster.cluster('INFO')) as string;
    expect(info).toMatch(/cluster_state:ok/);
    expect(info).toMatch(/cluster_slots_assigned:16384/);
    expect(Number(/cluster_size:(\d+)/.exec(info)?.[1])).toBeGreaterThanOrEqual(3);
  });

  it('gives the lock to exactly one of 100 concurrent acquires from 10 cluster clients', async () => {
    const clients = Array.from({ length: 10 }, () => connectCluster());
    try {
      const guards = clients.map((c) => new FireOnceGuard({ redis: c, keyPrefix: prefix }));
      const outcomes = await Promise.all(Array.from({ length: 100 }, (_, i) => guards[i % guards.length].acquire(target)));
      const owners = outcomes.filter((o) => o.kind === 'acquired');
      expect(owners).toHaveLength(1);
      expect(outcomes.filter((o) => o.kind === 'held')).toHaveLength(99);
      expect(await lockToken(cluster, guard.keys.lock(target.scope, target.step))).toBe(acquired(owners[0]).token);
    } finally {
      clients.forEach((c) => c.disconnect());
    }
  });

  it('keeps one owner per scope when 60 scopes race at once, with the scopes spread over every master', async () => {
    const clients = Array.from({ length: 4 }, () => connectCluster());
    try {
      const guards = clients.map((c) => new FireOnceGuard({ redis: c, keyPrefix: prefix }));
      const scopes = Array.from({ length: 60 }, () => `scope-${randomUUID()}`);
      const outcomes = await Promise.all(
        scopes.flatMap((scope) => Array.from({ length: 10 }, (_, i) => guards[i % guards.length].acquire({ ...target, scope }).then((o) => ({ scope, o })))),
      );
      for (const scope of scopes) {
        const mine = outcomes.filter((x) => x.scope === scope).map((x) => x.o.kind);
        expect({ scope, owners: mine.filter((k) => k === 'acquired').length }).toEqual({ scope, owners: 1 });
      }
      // Each master's SCAN sees only its own keys: every master holds some of these locks.
      const perMaster = await Promise.all(
        (await masters(cluster)).map(async (node) => (await node.scan('0', 'MATCH', `${prefix}:v3:*:l:*`, 'COUNT', 10_000))[1].length),
      );
      expect(perMaster.every((n) => n > 0)).toBe(true);
      expect(perMaster.reduce((a, b) => a + b, 0)).toBe(60);
    } finally {
      clients.forEach((c) => c.disconnect());
    }
  });

  it('round-trips the artifact byte for byte, and the artifact takes over from the lock', async () => {
    const lease = acquired(await guard.acquire(target));
    const bytes = Buffer.from([0, 0xff, 0x80, 0x0a, 0x00, 0x7b]);
    expect((await guard.commit(lease, bytes)).ours).toBe(true);
    expect(await cluster.exists(lease.lockKey)).toBe(0);
    const again = await guard.acquire(target);
    if (again.kind !== 'fast-forward') throw new Error(`expected fast-forward, got ${again.kind}`);
    expect(Buffer.compare(again.artifact, bytes)).toBe(0);
  });

  it("refuses to release with a stale token: a stale owner never deletes a newer owner's lock", async () => {
    const a = acquired(await guard.acquire(target));
    await cluster.del(a.lockKey); // A's lock "expired"
    const b = acquired(await guard.acquire(target));
    expect(b.fencingToken).toBeGreaterThan(a.fencingToken);
    expect((await guard.release(a)).ours).toBe(false);
    expect(await lockToken(cluster, b.lockKey)).toBe(b.token);
    expect(await guard.extend(a, 60_000)).toBe(false);
    expect(await guard.extend(b, 60_000)).toBe(true);
    expect((await guard.release(b)).ours).toBe(true);
    expect(await cluster.exists(b.lockKey)).toBe(0);
  });

  it('renews a lease through extend.lua and loses it when the lock is taken away', async () => {
    const lease = acquired(await guard.acquire(target, { lockTtlMs: 60_000 }));
    const lost: Error[] = [];
    const renewal = startRenewal(guard, lease, 60_000, (err) => lost.push(err));
    try {
      expect(await renewal.renewNow()).toBe(true);
      await writeLock(cluster, lease.lockKey, 'someone-else');
      expect(await renewal.renewNow()).toBe(false);
      expect(renewal.signal.aborted).toBe(true);
      expect(lost).toHaveLength(1);
    } finally {
      renewal.stop();
    }
  });

  it("checks an external artifact key in the scope's slot and never writes it", async () => {
    const external = guard.keys.external(target.scope, target.jobType);
    const ext = { ...target, externalArtifactKey: external };
    expect((await guard.acquire(ext)).kind).toBe('acquired');
    expect(await cluster.exists(external)).toBe(0);
    await cluster.set(external, 'done');
    expect((await guard.acquire(ext)).kind).toBe('fast-forward');
  });

  it('recovers after SCRIPT FLUSH on every master (EVALSHA falls back to EVAL per node)', async () => {
    const scopes = Array.from({ length: 30 }, () => `scope-${randomUUID()}`);
    await Promise.all(scopes.map((scope) => guard.acquire({ ...target, scope })));
    await Promise.all((await masters(cluster)).map((node) => node.script('FLUSH')));
    const outcomes = await Promise.all(scopes.map((scope) => guard.acquire({ ...target, scope })));
    expect(outcomes.map((o) => o.kind)).toEqual(scopes.map(() => 'held'));
    const fresh = await Promise.all(scopes.map((scope) => guard.acquire({ ...target, scope, step: 'other' })));
    expect(fresh.map((o) => o.kind)).toEqual(scopes.map(() => 'acquired'));
  });

  it('fails closed with FireOnceStoreUnavailable when no cluster node answers', async () => {
    const dead = new Cluster([{ host: '127.0.0.1', port: 1 }], {
      clusterRetryStrategy: () => null,
      lazyConnect: true,
      redisOptions: { disconnectTimeout: 10 },
    });
    dead.on('error', () => undefined);
    const deadGuard = new FireOnceGuard({ redis: dead, keyPrefix: prefix, storeTimeoutMs: 2_000 });
    try {
      const err = await deadGuard.acquire(target).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(FireOnceStoreUnavailable);
      expect((err as FireOnceStoreUnavailable).retryable).toBe(true);
    } finally {
      dead.disconnect();
    }
  });
});
