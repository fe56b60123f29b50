import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Cluster } from 'ioredis';
import { FireOnceGuard, FireOnceStoreUnavailable, type DispatchTarget } from '../../src';
import { ParkingLot, encodeId } from '../../src/core';
import { startRedisCluster, type RedisClusterService } from '../../sample-workflows/services';
import { testPrefix } from '../support/redis';
import { connectCluster, deletePrefixOnCluster, errorCount, recordScriptCalls, type ScriptCall } from '../support/cluster/cluster';

// No script ever names keys of two slots: every key list the guard passes to a script is checked
// with the cluster's own CLUSTER KEYSLOT, for random (hostile) scopes, steps and job types, and
// the masters' error counters prove that no CROSSSLOT error happened meanwhile.
describe('every guard script touches one cluster slot', () => {
  let cluster: Cluster;
  let prefix: string;
  let guard: FireOnceGuard;
  let calls: ScriptCall[];

  beforeAll(() => {
    cluster = connectCluster();
    calls = recordScriptCalls(cluster);
  });
  beforeEach(() => {
    prefix = testPrefix('slots');
    guard = new FireOnceGuard({ redis: cluster, keyPrefix: prefix, lockTtlMs: 30_000, artifactTtlMs: 60_000 });
    calls.length = 0;
  });
  afterEach(() => deletePrefixOnCluster(cluster, prefix));
  afterAll(() => cluster.quit());

  const keySlot = async (key: string) => Number(await cluster.cluster('KEYSLOT', key));

  /** The cluster's slot of `{<namespace>/<encoded scope>}`: what every key of the scope must hash to. */
  const scopeSlot = (scope: string) => keySlot(`{default/${encodeId('scope', scope)}}`);

  /** Every call's keys, with the slot of each one as the cluster computes it. */
  const slotsOf = (recorded: readonly ScriptCall[]) =>
    Promise.all(recorded.map(async (call) => ({ keys: call.keys, slots: await Promise.all(call.keys.map(keySlot)), error: call.error?.message })));

  /**
   * acquire, park a waiter, renew, reap (held), then succeed or fail, reap again, and acquire
   * again: every guard script. On success the guard commits its artifact, or (external mode) the
   * "job" writes the external key.
   */
  async function exercise(target: DispatchTarget, succeed: boolean): Promise<void> {
    const outcome = await guard.acquire(target);
    if (outcome.kind !== 'acquired') throw new Error(`expected acquired, got ${outcome.kind}`);
    const lot = new ParkingLot(guard);
    expect((await lot.park(target, Buffer.from('task-token'))).kind).toBe('parked');
    expect(await guard.extend(outcome.lease, 30_000)).toBe(true);
    expect((await lot.reap(lot.spot(target))).kind).toBe('held');
    if (!succeed) expect((await guard.release(outcome.lease)).ours).toBe(true);
    else if (target.externalArtifactKey) await cluster.set(target.externalArtifactKey, 'done');
    else expect((await guard.commit(outcome.lease, Buffer.from('result'))).ours).toBe(true);
    await lot.reap(lot.spot(target));
    expect((await guard.acquire(target)).kind).toBe(succeed ? 'fast-forward' : 'acquired');
  }

  // Any string: unicode, braces (hash-tag syntax), colons, globs, whitespace around text.
  const id = fc
    .oneof(
      fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }),
      fc.constantFrom('{', '}', '{}', '}{', 'a{b}c', ':', '*', '?[x]', '%7B', 'chat:7', '{scope}', '\u0000', 'ß→🙂'),
      fc.stringMatching(/^[{}:*?a-z0-9]{1,12}$/),
    )
    .filter((s) => s.trim().length > 0 && s.isWellFormed());

  it('for 150 random (scope, step, jobType), in both artifact modes, every script call names keys of the scope slot only', async () => {
    const crossSlotBefore = await errorCount(cluster, 'CROSSSLOT');
    const seenSlots = new Set<number>();
    await fc.assert(
      fc.asyncProperty(id, id, id, fc.boolean(), fc.boolean(), async (scope, step, jobType, external, succeed) => {
        calls.length = 0;
        await deletePrefixOnCluster(cluster, prefix); // a shrinking run starts from nothing too
        const target: DispatchTarget = {
          scope,
          step,
          jobType,
          ...(external ? { externalArtifactKey: guard.keys.external(scope, jobType) } : {}),
        };
        await exercise(target, succeed);
        const expected = await scopeSlot(scope);
        seenSlots.add(expected);
        const recorded = await slotsOf(calls);
        expect(recorded.length).toBeGreaterThanOrEqual(3);
        for (const call of recorded) expect(call).toEqual({ keys: call.keys, slots: call.keys.map(() => expected), error: undefined });
      }),
      { numRuns: 150 },
    );
    expect(seenSlots.size).toBeGreaterThan(50); // the scopes really were spread over the slot space
    expect(await errorCount(cluster, 'CROSSSLOT')).toBe(crossSlotBefore);
  });

  it('500 scopes racing at once: every script call stays in its slot and no CROSSSLOT occurs', async () => {
    const crossSlotBefore = await errorCount(cluster, 'CROSSSLOT');
    const scopes = Array.from({ length: 500 }, (_, i) => `race:${i}:{${randomUUID()}}`);
    await Promise.all(scopes.map((scope, i) => exercise({ scope, step: `step-${i % 7}`, jobType: `job-${i % 3}` }, i % 2 === 0)));
    const recorded = await slotsOf(calls);
    expect(recorded.length).toBeGreaterThanOrEqual(500 * 4);
    expect(recorded.filter((c) => c.error !== undefined || new Set(c.slots).size !== 1)).toEqual([]);
    expect(await errorCount(cluster, 'CROSSSLOT')).toBe(crossSlotBefore);
  });
});

// A CROSSSLOT on purpose, on a cluster of this test's own: on the shared one it would count in
// the other files' "no CROSSSLOT meanwhile" checks.
describe('an external artifact key outside the scope slot', () => {
  let service: RedisClusterService;
  let cluster: Cluster;

  beforeAll(async () => {
    service = await startRedisCluster({ own: true });
    cluster = new Cluster([...service.nodes]);
  }, 60_000);
  afterAll(async () => {
    cluster?.disconnect();
    await service?.stop();
  });

  it('is refused by the cluster: the guard fails closed, nothing is locked', async () => {
    const guard = new FireOnceGuard({ redis: cluster, keyPrefix: 'slots' });
    const keySlot = async (key: string) => Number(await cluster.cluster('KEYSLOT', key));
    const crossSlotBefore = await errorCount(cluster, 'CROSSSLOT');
    // A key of the user's own, outside the guard's prefix: under the prefix, one outside the
    // scope is refused before Redis is asked (test/core/external-key.test.ts).
    const target = { scope: 'session-x', step: 'dispatch', jobType: 'report', externalArtifactKey: 'reports-of-slots:session-x' };
    expect(await keySlot(target.externalArtifactKey)).not.toBe(await keySlot(`{default/${encodeId('scope', target.scope)}}`));
    const err = await guard.acquire(target).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FireOnceStoreUnavailable);
    expect((err as Error).message).toMatch(/CROSSSLOT/);
    expect(await cluster.exists(guard.keys.lock(target.scope, target.step))).toBe(0);
    expect(await errorCount(cluster, 'CROSSSLOT')).toBe(crossSlotBefore + 1);
  });
});
