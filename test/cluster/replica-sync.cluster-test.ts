import type { Cluster } from 'ioredis';
import { FireOnceGuard, FireOnceStoreUnavailable, type DispatchTarget, type Lease } from '../../src';
import {
  clientOf,
  commandCalls,
  errorReplies,
  migrateSlot,
  startReplicatedCluster,
  targetOn,
  type NodeAddress,
  type ReplicatedCluster,
} from '../support/cluster/replicated';
import { testPrefix } from '../support/redis';
import { REPLICATION_PACE, waitFor } from '../support/wait';

// replicaSync on a Redis Cluster whose slot changes owner under the client: three masters, the
// first with a replica, the others with none (spawned here; the suite's cluster has no replica).
// A scope of the first master is moved to the second between two of the guard's calls, or left
// migrating, so the client's slot map still names the first: the guard's command is answered with
// MOVED (slot moved) or ASK (slot mid-migration). Its WAIT must count the write on the master where
// it ran, never pass because the first master's replica acknowledged something else. (An acquire
// sent mid-migration never runs on the importing master: its two keys are missing there, and
// Redis answers a multi-key command with missing keys TRYAGAIN, so the acquire fails closed.)
describe('replica sync on a Cluster whose slot moves between calls', () => {
  let nodes: ReplicatedCluster;
  let cluster: Cluster;
  let guard: FireOnceGuard;
  let first: NodeAddress;
  let second: NodeAddress;
  let dispatches: number;

  beforeAll(async () => {
    nodes = await startReplicatedCluster();
    [first, second] = nodes.masters;
  }, 60_000);
  afterAll(() => nodes?.stop());
  beforeEach(async () => {
    cluster = await clientOf(nodes); // the slot map, read before the first guard call
    // The first master's replica answers at once; the second has none, so a WAIT there returns 0
    // after 1 s.
    guard = new FireOnceGuard({ redis: cluster, keyPrefix: testPrefix('crs'), lockTtlMs: 60_000, replicaSync: { replicas: 1, timeoutMs: 1_000 } });
    dispatches = 0;
  });
  afterEach(() => cluster.quit());

  /** One invocation: the "job" runs only if the guard granted the lock; the count is the test's. */
  async function invoke(target: DispatchTarget): Promise<void> {
    const outcome = await guard.acquire(target);
    if (outcome.kind === 'acquired') dispatches++;
  }

  /** A fresh target whose scope lives on the first master (the one with the replica), and its slot. */
  const targetOnFirst = () => targetOn(cluster, guard, first);

  async function leaseOnFirst(): Promise<{ lease: Lease; slot: number }> {
    const { target, slot } = await targetOnFirst();
    const outcome = await guard.acquire(target);
    if (outcome.kind !== 'acquired') throw new Error(`expected acquired, got ${outcome.kind}`);
    return { lease: outcome.lease, slot };
  }

  /** Run `meanwhile` after the guard's next acquire took its lock, before it waits for the replicas. */
  function beforeConfirm(meanwhile: () => Promise<unknown>): void {
    const replicas = (guard as unknown as { replicas: { confirm: (...args: unknown[]) => Promise<unknown> } }).replicas;
    const confirm = replicas.confirm.bind(replicas);
    replicas.confirm = (...args: unknown[]) => meanwhile().then(() => confirm(...args));
  }

  const lockGoneFrom = (address: NodeAddress, key: string) =>
    waitFor(`the unreplicated lock to be undone on ${address.port}`, async () => (await nodes.node(address).exists(key)) === 0, REPLICATION_PACE);

  it('an acquire whose slot moves before its confirm is undone where it moved', async () => {
    const { target, slot } = await targetOnFirst();
    // The acquire took the lock on the first master; the slot moves, key and all, before the
    // confirm: the client still routes the confirm to the first master, which answers MOVED.
    beforeConfirm(() => migrateSlot(nodes, slot, first, second));
    const err = await invoke(target).catch((e: unknown) => e);
    expect(dispatches).toBe(0);
    expect(err).toBeInstanceOf(FireOnceStoreUnavailable);
    expect((err as Error).message).toBe('only 0 of 1 replica(s) acknowledged the lock within 1000 ms (replicaSync)');
    await lockGoneFrom(second, guard.keys.lock(target.scope, target.step));
  });

  it('an acquire whose lock is gone where its slot moved, before its confirm, says the lock was lost', async () => {
    const { target, slot } = await targetOnFirst();
    beforeConfirm(async () => {
      await migrateSlot(nodes, slot, first, second);
      await nodes.node(second).del(guard.keys.lock(target.scope, target.step)); // expired, say
    });
    const err = await invoke(target).catch((e: unknown) => e);
    expect(dispatches).toBe(0);
    expect(err).toBeInstanceOf(FireOnceStoreUnavailable);
    expect((err as Error).message).toMatch(/^the lock was lost before the replicas acknowledged it .*: nothing was dispatched$/);
  });

  it("'auto' waits on each master for its own replicas: a master with none leaves the others waiting for theirs", async () => {
    // The first master has a replica and the others none, as after a failover whose old master has
    // not come back. 'auto' waited for the fewest any master had: none, so no write waited at all.
    const auto = new FireOnceGuard({ redis: cluster, keyPrefix: testPrefix('crs-auto'), lockTtlMs: 60_000, replicaSync: 'auto' });
    const [onFirst, onSecond] = [await targetOn(cluster, auto, first), await targetOn(cluster, auto, second)];
    const waits = () => Promise.all([first, second].map((address) => commandCalls(nodes, address, 'wait')));
    const before = await waits();
    const taken = await auto.acquire(onFirst.target);
    if (taken.kind !== 'acquired') throw new Error(`expected acquired, got ${taken.kind}`);
    expect(await auto.commit(taken.lease, Buffer.from('result'))).toEqual({ ours: true, stored: true, waiters: [] });
    expect((await auto.acquire(onSecond.target)).kind).toBe('acquired');
    const after = await waits();
    // The acquire's confirm and the commit on the first master; nothing to wait for on the second.
    expect([after[0] - before[0], after[1] - before[1]]).toEqual([2, 0]);
  });

  it("'auto': a write whose slot moved to a master without a replica asks that master's count, not the old one's", async () => {
    // The client's map still names the first master (one replica): the renewal is redirected to the
    // second (none), where a WAIT for the first master's 1 could only time out and fail it.
    const auto = new FireOnceGuard({
      redis: cluster,
      keyPrefix: testPrefix('crs-moved'),
      lockTtlMs: 60_000,
      replicaSync: { replicas: 'auto', timeoutMs: 1_000 },
    });
    const { target, slot } = await targetOn(cluster, auto, first);
    const taken = await auto.acquire(target);
    if (taken.kind !== 'acquired') throw new Error(`expected acquired, got ${taken.kind}`);
    await migrateSlot(nodes, slot, first, second);
    expect(await auto.extend(taken.lease, 60_000)).toBe(true);
  });

  it('a renewal and a commit after their slot moved wait on the new master, and the commit stands', async () => {
    const { lease, slot } = await leaseOnFirst();
    await migrateSlot(nodes, slot, first, second);
    await expect(guard.extend(lease, 60_000)).rejects.toThrow('only 0 of 1 replica(s) acknowledged the lease renewal within 1000 ms (replicaSync)');
    const before = await commandCalls(nodes, second, 'wait');
    expect(await guard.commit(lease, Buffer.from('result'))).toEqual({ ours: true, stored: true, waiters: [] });
    expect(await commandCalls(nodes, second, 'wait')).toBe(before + 1); // the commit's WAIT went where the commit ran
    const again = await guard.acquire(lease.target);
    expect(again.kind === 'fast-forward' && again.artifact.toString()).toBe('result');
  });

  it('a renewal sent mid-migration waits on the master its keys moved to', async () => {
    const { lease, slot } = await leaseOnFirst();
    await cluster.rpush(lease.waitersKey, 'a parked waiter'); // no TTL yet: only a renewal gives it one
    await migrateSlot(nodes, slot, first, second, [lease.lockKey, lease.waitersKey]); // the first master answers ASK for them
    try {
      await expect(guard.extend(lease, 60_000)).rejects.toThrow('only 0 of 1 replica(s) acknowledged the lease renewal within 1000 ms (replicaSync)');
    } finally {
      await migrateSlot(nodes, slot, first, second);
    }
    expect(await nodes.node(second).pttl(lease.waitersKey)).toBeGreaterThan(0); // the renewal ran where the keys moved
  });

  it('a commit mid-migration answered TRYAGAIN is sent again until the slot has moved, and its result stands', async () => {
    const { target, slot } = await targetOnFirst();
    let lease: Lease | undefined;
    const outcome = await guard.acquire(target);
    if (outcome.kind === 'acquired') [dispatches, lease] = [dispatches + 1, outcome.lease];
    // The lock has moved to the second master, the artifact key (not written yet) has not: the
    // first master answers ASK, and the second, asked, TRYAGAIN (a multi-key script with a key it
    // does not have) until the slot is its own.
    await migrateSlot(nodes, slot, first, second, [lease!.lockKey]);
    const tryAgains = await errorReplies(nodes, second, 'TRYAGAIN');
    let settled = false;
    const committing = guard.commit(lease!, Buffer.from('result')).finally(() => (settled = true));
    await waitFor('the commit to be answered TRYAGAIN', async () => settled || (await errorReplies(nodes, second, 'TRYAGAIN')) > tryAgains, REPLICATION_PACE);
    await migrateSlot(nodes, slot, first, second); // the migration ends
    const committed = await committing.catch((err: unknown) => err);
    await nodes.node(second).del(lease!.lockKey); // its TTL runs out, had the commit left it
    // The next invocation, by a guard that does not wait for replicas (the second master has none):
    // it fast-forwards to the stored result, or dispatches again if the commit was lost.
    const next = await new FireOnceGuard({ redis: cluster, keyPrefix: guard.options.keyPrefix, replicaSync: false }).acquire(target);
    if (next.kind === 'acquired') dispatches++;
    expect(dispatches).toBe(1);
    expect(committed).toEqual({ ours: true, stored: true, waiters: [] });
  });

  it('a commit answered TRYAGAIN until storeTimeoutMs nears fails retryably, saying the slot is moving', async () => {
    const { lease, slot } = await leaseOnFirst();
    await migrateSlot(nodes, slot, first, second, [lease.lockKey]); // and the migration never ends
    try {
      const err = await guard.commit(lease, Buffer.from('result')).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(FireOnceStoreUnavailable);
      expect((err as FireOnceStoreUnavailable).retryable).toBe(true);
      expect((err as Error).message).toMatch(/is moving \(TRYAGAIN [^)]*\): the write did not run where its WAIT could count it/);
    } finally {
      await migrateSlot(nodes, slot, first, second);
    }
  });

  it('a write still redirected after two redirects fails retryably, and an acquire dispatches nothing', async () => {
    const { target, slot } = await targetOnFirst();
    const [from, to] = [nodes.node(first), nodes.node(second)];
    // A redirect loop: the lock moves to the second master, which then forgets it was importing
    // the slot; the first (migrating) answers ASK for the lock, the second MOVED back to the first.
    beforeConfirm(async () => {
      await migrateSlot(nodes, slot, first, second, [guard.keys.lock(target.scope, target.step)]);
      await to.cluster('SETSLOT', slot, 'STABLE');
    });
    try {
      const err = await invoke(target).catch((e: unknown) => e);
      expect(dispatches).toBe(0);
      expect(err).toBeInstanceOf(FireOnceStoreUnavailable);
      expect((err as FireOnceStoreUnavailable).retryable).toBe(true);
      expect((err as Error).message).toMatch(/is moving \((ASK|MOVED) \d+ [\d.:]+\): the write did not run where its WAIT could count it/);
    } finally {
      for (const node of [to, from, nodes.node(nodes.masters[2])]) await node.cluster('SETSLOT', slot, 'NODE', (await to.cluster('MYID')) as string);
    }
  });
});
