import { randomUUID } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { FireOnceGuard, FireOnceStoreUnavailable, type AcquireOutcome } from '../../src';
import { testPrefix } from '../support/redis';
import { connectCluster, connectNode, deletePrefixOnCluster, errorCount, keySlot, masters } from '../support/cluster/cluster';
import { lockToken } from '../support/records';

// Resharding: one slot is moved from its master to another one (SETSLOT IMPORTING/MIGRATING,
// MIGRATE in small batches, SETSLOT NODE), the way `redis-cli --cluster reshard` does it, while
// invocations race on scopes of that slot. Redis answers a script whose keys are half moved with
// TRYAGAIN and one whose keys are all gone with ASK; ioredis follows both, and a call that runs
// out of redirections fails closed (FireOnceStoreUnavailable) and is tried again, as Temporal
// retries the activity. The guarantee must hold throughout: one owner per scope, locks and
// artifacts moved intact.
describe('fire-once while a slot migrates between masters', () => {
  let cluster: Cluster;
  let prefix: string;
  let guard: FireOnceGuard;
  let admin: Redis[] = [];

  beforeAll(() => {
    cluster = connectCluster();
    prefix = testPrefix('cmig');
    guard = new FireOnceGuard({ redis: cluster, keyPrefix: prefix, lockTtlMs: 120_000, artifactTtlMs: 240_000, storeTimeoutMs: 10_000 });
  });
  afterAll(async () => {
    admin.forEach((a) => a.disconnect());
    await deletePrefixOnCluster(cluster, prefix);
    await cluster.quit();
  });

  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  /** Scopes whose keys all hash to `slot` (the namespace and scope are the hash tag; plain names encode as themselves). */
  function scopesInSlot(slot: number, n: number): string[] {
    const scopes: string[] = [];
    for (let i = 0; scopes.length < n; i++) if (keySlot(`{default/m${i}}`) === slot) scopes.push(`m${i}`);
    return scopes;
  }

  /** Move `slot` from `from` to `to`, `batch` keys per MIGRATE, calling `between()` before each batch. */
  async function migrateSlot(slot: number, from: Redis, to: Redis, others: Redis[], between: () => void, batch = 4): Promise<number> {
    const [fromId, toId] = await Promise.all([from.cluster('MYID'), to.cluster('MYID')]);
    await to.cluster('SETSLOT', slot, 'IMPORTING', fromId as string);
    await from.cluster('SETSLOT', slot, 'MIGRATING', toId as string);
    let moved = 0;
    for (;;) {
      const keys = (await from.cluster('GETKEYSINSLOT', slot, batch)) as string[];
      if (keys.length === 0) break;
      between();
      await from.migrate(to.options.host as string, to.options.port as number, '', 0, 5_000, 'KEYS', ...keys);
      moved += keys.length;
      await sleep(2); // let the racers' redirections interleave with the next batch
    }
    for (const node of [to, from, ...others]) await node.cluster('SETSLOT', slot, 'NODE', toId as string);
    return moved;
  }

  it('keeps one owner per scope, and every lock and artifact, through a live migration of their slot', async () => {
    const nodes = await masters(cluster);
    admin = nodes.map((n) => connectNode(n.options as { host: string; port: number }));
    const slot = keySlot(`{seed-${randomUUID()}}`);
    const ownerPort = (await cluster.cluster('SLOTS')).find(([a, b]) => slot >= a && slot <= b)?.[2][1];
    const source = admin.find((a) => a.options.port === ownerPort) as Redis;
    const target = admin.find((a) => a !== source) as Redis;
    const others = admin.filter((a) => a !== source && a !== target);

    const scopes = scopesInSlot(slot, 60);
    const [fresh, held, done] = [scopes.slice(0, 40), scopes.slice(40, 50), scopes.slice(50)];
    const t = (scope: string) => ({ scope, step: 'dispatch', jobType: 'summary' });
    // Before the move: a lock held by an old holder on `held`, a committed artifact on `done`.
    const heldTokens = new Map<string, string>();
    for (const scope of held) {
      const o = await guard.acquire(t(scope));
      if (o.kind !== 'acquired') throw new Error('expected acquired');
      heldTokens.set(scope, o.lease.token);
    }
    for (const scope of done) {
      const o = await guard.acquire(t(scope));
      if (o.kind !== 'acquired') throw new Error('expected acquired');
      await guard.commit(o.lease, Buffer.from(`artifact of ${scope}`));
    }

    const before = { redirects: await redirections(), crossSlot: await errorCount(cluster, 'CROSSSLOT') };
    const outcomes = new Map<string, AcquireOutcome['kind'][]>();
    const retriedAfterStoreError: string[] = [];
    const calls: Promise<void>[] = [];
    /** One invocation: decide once, as the interceptor does; on a store error, try again like a retry. */
    const invoke = (scope: string) =>
      calls.push(
        (async () => {
          for (;;) {
            try {
              const outcome = await guard.acquire(t(scope));
              if (outcome.kind === 'acquired') {
                await cluster.incr(`${prefix}:dispatches:{default/${scope}}`); // the "job", on a key of the same slot
                await guard.commit(outcome.lease, Buffer.from(`artifact of ${scope}`));
              }
              outcomes.set(scope, [...(outcomes.get(scope) ?? []), outcome.kind]);
              return;
            } catch (err) {
              if (!(err instanceof FireOnceStoreUnavailable)) throw err;
              retriedAfterStoreError.push(scope);
              await sleep(20);
            }
          }
        })(),
      );
    const all = [...fresh, ...held, ...done];
    let wave = 0;
    const moved = await migrateSlot(slot, source, target, others, () => {
      for (let i = 0; i < 6; i++) invoke(all[(wave * 6 + i) % all.length]);
      wave++;
    });
    for (const scope of all) invoke(scope); // after the move: MOVED, then the new owner
    await Promise.all(calls);

    expect(moved).toBeGreaterThan(0);
    expect(Number(await target.cluster('COUNTKEYSINSLOT', slot))).toBeGreaterThanOrEqual(moved);
    expect(Number(await source.cluster('COUNTKEYSINSLOT', slot))).toBe(0);
    // The racers really ran into the migration: the masters answered with ASK, TRYAGAIN or MOVED.
    const after = await redirections();
    expect(after.total - before.redirects.total).toBeGreaterThan(0);
    expect(await errorCount(cluster, 'CROSSSLOT')).toBe(before.crossSlot);

    for (const scope of fresh) {
      const dispatches = Number(await cluster.get(`${prefix}:dispatches:{default/${scope}}`));
      const kinds = outcomes.get(scope) ?? [];
      expect({ scope, dispatches, acquired: kinds.filter((k) => k === 'acquired').length }).toEqual({ scope, dispatches: 1, acquired: 1 });
    }
    for (const scope of held) {
      expect({ scope, kinds: [...new Set(outcomes.get(scope))] }).toEqual({ scope, kinds: ['held'] });
      expect(await lockToken(cluster, guard.keys.lock(scope, 'dispatch'))).toBe(heldTokens.get(scope));
    }
    for (const scope of done) {
      expect({ scope, kinds: [...new Set(outcomes.get(scope))] }).toEqual({ scope, kinds: ['fast-forward'] });
      const again = await guard.acquire(t(scope));
      expect(again.kind === 'fast-forward' && again.artifact.toString()).toBe(`artifact of ${scope}`);
    }
    process.stdout.write(
      `slot ${slot} moved ${source.options.port} -> ${target.options.port}: ${moved} keys, ${calls.length} invocations, ` +
        `${retriedAfterStoreError.length} retried after failing closed; replies: ASK ${after.ASK - before.redirects.ASK}, ` +
        `TRYAGAIN ${after.TRYAGAIN - before.redirects.TRYAGAIN}, MOVED ${after.MOVED - before.redirects.MOVED}\n`,
    );

    // Put the slot back (with the test's keys gone), so later tests see the layout they started with.
    await deletePrefixOnCluster(cluster, prefix);
    await migrateSlot(slot, target, source, others, () => undefined);
  });

  /** ASK, TRYAGAIN and MOVED replies so far, over every master, with the total. */
  async function redirections(): Promise<Record<'ASK' | 'TRYAGAIN' | 'MOVED' | 'total', number>> {
    const [ask, tryAgain, moved] = await Promise.all(['ASK', 'TRYAGAIN', 'MOVED'].map((type) => errorCount(cluster, type)));
    return { ASK: ask, TRYAGAIN: tryAgain, MOVED: moved, total: ask + tryAgain + moved };
  }
});
