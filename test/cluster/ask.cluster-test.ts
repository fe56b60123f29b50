import { setTimeout as sleep } from 'node:timers/promises';
import { ApplicationFailure, RawValue, defaultPayloadConverter } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import type { Cluster } from 'ioredis';
import { FireOnceGuard, fireOnce } from '../../src';
import { createFireOnceActivityInterceptor, fireOnceActivityMap } from '../../src/core';
import { clientOf, detourReplies, migrateSlot, targetOn, type NodeAddress, useReplicatedCluster } from '../support/cluster/replicated';
import { testPrefix } from '../support/redis';
import { REPLICATION_PACE, waitFor } from '../support/wait';

// N invocations of one step, on two workers (each with its own Cluster client, guard and the
// plugin's interceptor, in a MockActivityEnvironment: the activity path of a worker, no server),
// fire and fast-forward while the slot of the step's keys moves between masters, as
// `redis-cli --cluster reshard` moves it (SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE).
// An invocation failed retryably is run again, as Temporal retries an activity. The slot is held
// mid-migration until some have failed closed so, having outlasted the ASK, TRYAGAIN and MOVED
// replies ioredis follows for one command. Spawned here: three masters (the first with a
// replica) and a spare master with no slot, which no client knows until a slot moves to it.
describe('invocations of one step while its slot migrates', () => {
  const N = 8;
  let first: NodeAddress;
  let second: NodeAddress;
  let prefix: string;
  let workers: { cluster: Cluster; guard: FireOnceGuard; factory: ActivityInterceptorsFactory }[];
  let openGate: () => void;
  let gate: Promise<void>;
  let retries: number;

  const spawned = useReplicatedCluster({ spare: true });
  let nodes: ReturnType<typeof spawned>;
  beforeEach(async () => {
    nodes = spawned();
    [first, second] = nodes.masters;
    prefix = testPrefix('cask');
    gate = new Promise((resolve) => (openGate = resolve));
    retries = 0;
    workers = await Promise.all(
      [0, 1].map(async () => {
        const cluster = await clientOf(nodes);
        const guard = new FireOnceGuard({ redis: cluster, keyPrefix: prefix, lockTtlMs: 600_000 });
        const factory = createFireOnceActivityInterceptor({ guard, activities: fireOnceActivityMap({ summarise }), onInFlight: 'wait', pollIntervalMs: 20 });
        return { cluster, guard, factory };
      }),
    );
  });
  afterEach(() => Promise.all(workers.map(({ cluster }) => cluster.quit())));

  /** The job: counts itself on a key the guard does not own, then runs until the test opens the gate. */
  const summarise = fireOnce(
    async (scope: string) => {
      await workers[0].cluster.incr(`${prefix}:dispatches`);
      await gate;
      return `result of ${scope}`;
    },
    { scope: ([scope]) => scope, jobType: 'summary' },
  );
  const dispatches = async () => Number(await workers[0].cluster.get(`${prefix}:dispatches`));

  /** Invocation `i` of the step, on worker `i % 2`, run again after each retryable failure; resolves its result. */
  async function invoke(scope: string, i: number): Promise<unknown> {
    const { factory } = workers[i % 2];
    for (let attempt = 1; ; attempt++) {
      const info = {
        namespace: 'default',
        activityType: 'summarise',
        workflowExecution: { workflowId: `wf-${i}`, runId: `run-${i}` },
        activityId: '1',
        attempt,
      };
      const env = new MockActivityEnvironment(
        { ...info, startToCloseTimeoutMs: 60_000, currentAttemptScheduledTimestampMs: Date.now() },
        { interceptors: [factory] },
      );
      try {
        const result = await env.run(summarise, scope);
        return result instanceof RawValue ? defaultPayloadConverter.fromPayload(result.payload) : result;
      } catch (err) {
        if (!(err instanceof ApplicationFailure) || err.nonRetryable) throw err;
        retries++;
        await sleep(50);
      }
    }
  }

  const detours = () => detourReplies(nodes);

  /**
   * Keep the slot mid-migration until invocations have failed closed and been run again: calls
   * sent then outlasted the replies ioredis follows for one command (16), the commit's included.
   */
  async function holdMidMigration(): Promise<number> {
    const before = await detours();
    await waitFor('invocations to fail closed and be retried', async () => retries >= 2, REPLICATION_PACE);
    return before;
  }

  const keysOf = (scope: string) => ({ lock: workers[0].guard.keys.lock(scope, 'summarise'), artifact: workers[0].guard.keys.artifact(scope, 'summary') });
  const slotHolds = async (node: NodeAddress, slot: number, key: string) =>
    ((await nodes.node(node).cluster('GETKEYSINSLOT', slot, 100)) as string[]).includes(key);

  /** After the migration: one dispatch, every result the job's, no lock on either master, the artifact on the new one. */
  async function expectAfterMigration(scope: string, slot: number, from: NodeAddress, to: NodeAddress, results: unknown[], before: number) {
    const { lock, artifact } = keysOf(scope);
    expect({ dispatches: await dispatches(), results }).toEqual({ dispatches: 1, results: Array(results.length).fill(`result of ${scope}`) });
    expect({ lockOnOld: await slotHolds(from, slot, lock), lockOnNew: await slotHolds(to, slot, lock) }).toEqual({ lockOnOld: false, lockOnNew: false });
    expect(await nodes.node(to).exists(artifact)).toBe(1);
    const later = await new FireOnceGuard({ redis: workers[1].cluster, keyPrefix: prefix }).acquire({ scope, step: 'summarise', jobType: 'summary' });
    expect(later.kind).toBe('fast-forward');
    process.stdout.write(`slot ${slot} ${from.port} -> ${to.port}: ${results.length} invocations, ${retries} retried, ${(await detours()) - before} detours\n`);
  }

  /** A scope of the first master, the holder's job running on its lock, and the other invocations waiting for it. */
  async function holderAndWaiters(): Promise<{ scope: string; slot: number; calls: Promise<unknown>[] }> {
    const { target, slot } = await targetOn(workers[0].cluster, workers[0].guard, first);
    const holder = invoke(target.scope, 0);
    await waitFor('the holder’s job to run', async () => (await dispatches()) === 1, REPLICATION_PACE);
    const waiters = Array.from({ length: N - 1 }, (_, i) => invoke(target.scope, i + 1));
    return { scope: target.scope, slot, calls: [holder, ...waiters] };
  }

  it('the lock on the old master: the commit, sent while the slot migrates, lands once it has moved; 1 dispatch, N results', async () => {
    const { scope, slot, calls } = await holderAndWaiters();
    await migrateSlot(nodes, slot, first, second, []); // open, nothing moved: the lock and the waiters' polls stay on the first master
    openGate(); // the job returns; its commit is answered TRYAGAIN (the lock is here, the artifact key not)
    const before = await holdMidMigration();
    await migrateSlot(nodes, slot, first, second);
    await expectAfterMigration(scope, slot, first, second, await Promise.all(calls), before);
  });

  it('the lock moved to a master no client knows yet: the commit, sent mid-migration, is written once the slot has moved', async () => {
    const spare = nodes.spare!;
    const { scope, slot, calls } = await holderAndWaiters();
    expect(workers.flatMap(({ cluster }) => cluster.nodes('all').map(({ options }) => options.port))).not.toContain(spare.port);
    await migrateSlot(nodes, slot, first, spare, [keysOf(scope).lock]); // the first master answers ASK for the step, naming the spare
    openGate(); // the commit: ASK, then TRYAGAIN on the spare (no artifact key there yet) until the slot is the spare's
    const before = await holdMidMigration();
    await migrateSlot(nodes, slot, first, spare);
    await expectAfterMigration(scope, slot, first, spare, await Promise.all(calls), before);
  });

  it('the artifact already moved mid-migration: every invocation fast-forwards to it, none dispatches again', async () => {
    openGate();
    const { target, slot } = await targetOn(workers[0].cluster, workers[0].guard, first);
    const done = await invoke(target.scope, 0); // dispatched before the migration, by worker 0
    await migrateSlot(nodes, slot, first, second, [keysOf(target.scope).artifact]);
    // Worker 0 saw the artifact and reads it with a GET, which follows the ASK; worker 1's acquire
    // script is answered ASK, then TRYAGAIN on the second master (no lock key there), until the slot has moved.
    const calls = Array.from({ length: N - 1 }, (_, i) => invoke(target.scope, i + 1));
    const before = await holdMidMigration();
    await migrateSlot(nodes, slot, first, second);
    await expectAfterMigration(target.scope, slot, first, second, [done, ...(await Promise.all(calls))], before);
  });
});
