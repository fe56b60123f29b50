import { randomUUID } from 'node:crypto';
import type { WorkflowHandle } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import type { Cluster, Redis } from 'ioredis';
import { FireOnceGuard, type AcquireOutcome, type DispatchTarget, type Lease } from '../../src';
import { WakeHub, waitForTurn } from '../../src/core';
import { counterKey, type JobResult } from '../integration/fixtures/activities';
import { testPrefix } from '../support/redis';
import { connectCluster, connectNode, deletePrefixOnCluster, masters } from '../support/cluster/cluster';
import { startClusterWorkers, type ClusterWorkers } from '../support/cluster/workers';

// Pub/sub wake-ups on a Redis Cluster: commit.lua and release.lua PUBLISH from inside a script on
// the scope's master, the cluster bus carries it to every node, and the WakeHub's subscriber (a
// duplicate() of the Cluster, connected to whichever node ioredis picks) hears it. Waiters here
// poll every 10 minutes (60 s in the worker processes), so only a wake-up can end their wait
// before the test's timeout: a passing test is the proof, with no timing assertion.
describe('pub/sub wake-ups on a Redis Cluster', () => {
  const LONG = 10 * 60_000;
  let cluster: Cluster;
  let prefix: string;
  let guard: FireOnceGuard;

  beforeAll(() => {
    cluster = connectCluster();
  });
  beforeEach(() => {
    prefix = testPrefix('cwake');
    guard = new FireOnceGuard({ redis: cluster, keyPrefix: prefix, lockTtlMs: 60_000, artifactTtlMs: 120_000 });
  });
  afterEach(() => deletePrefixOnCluster(cluster, prefix));
  afterAll(() => cluster.quit());

  const acquired = (outcome: AcquireOutcome): Lease => {
    if (outcome.kind !== 'acquired') throw new Error(`expected acquired, got ${outcome.kind}`);
    return outcome.lease;
  };

  /** Start `n` waiters and resolve once every one of them is asleep after its post-subscribe re-check. */
  async function sleepingWaiters(hub: WakeHub, target: DispatchTarget, n: number) {
    const held = await guard.acquire(target);
    if (held.kind !== 'held') throw new Error(`expected held, got ${held.kind}`);
    const asleep: Promise<void>[] = [];
    const outcomes = Array.from({ length: n }, () => {
      let fallAsleep!: () => void;
      asleep.push(new Promise<void>((r) => (fallAsleep = r)));
      return waitForTurn(guard, target, held, {}, { pollIntervalMs: LONG, deadline: Date.now() + LONG, wake: hub, onPoll: () => fallAsleep() });
    });
    await Promise.all(asleep);
    return outcomes;
  }

  it("a script's PUBLISH on one master reaches subscribers on every master", async () => {
    const target = { scope: `s-${randomUUID()}`, step: 'dispatch', jobType: 'summary' };
    const channel = guard.keys.wakeChannel(target.scope);
    const subscribers: Redis[] = (await masters(cluster)).map((node) => connectNode(node.options as { host: string; port: number }));
    try {
      // The cluster bus forwards a PUBLISH to the other masters asynchronously: wait for the
      // two messages on each subscriber (a lost one ends the test by its timeout).
      const heard = subscribers.map(
        (sub) =>
          new Promise<string[]>((resolve) => {
            const messages: string[] = [];
            sub.on('message', (ch: string, message: string) => {
              if (ch === channel && messages.push(message) === 2) resolve(messages);
            });
          }),
      );
      await Promise.all(subscribers.map((sub) => sub.subscribe(channel)));
      const first = acquired(await guard.acquire(target));
      expect((await guard.release(first)).ours).toBe(true);
      const second = acquired(await guard.acquire(target));
      expect((await guard.commit(second, Buffer.from('done'))).ours).toBe(true);
      expect(await Promise.all(heard)).toEqual(subscribers.map(() => ['release', 'commit']));
    } finally {
      subscribers.forEach((s) => s.disconnect());
    }
  }, 60_000);

  it('waiters asleep on a Cluster WakeHub are woken by the commit and fast-forward', async () => {
    const hub = new WakeHub(cluster);
    try {
      const target = { scope: `s-${randomUUID()}`, step: 'dispatch', jobType: 'summary' };
      const holder = acquired(await guard.acquire(target));
      const waiters = await sleepingWaiters(hub, target, 3);
      expect((await guard.commit(holder, Buffer.from('done'))).ours).toBe(true);
      const outcomes = await Promise.all(waiters);
      expect(outcomes.map((o) => o.kind)).toEqual(['fast-forward', 'fast-forward', 'fast-forward']);
    } finally {
      hub.close();
    }
  }, 60_000);

  it('a release wakes the waiters: exactly one acquires, and its commit wakes the rest', async () => {
    const hub = new WakeHub(cluster);
    try {
      const target = { scope: `s-${randomUUID()}`, step: 'dispatch', jobType: 'summary' };
      const holder = acquired(await guard.acquire(target));
      const waiters = await sleepingWaiters(hub, target, 3);
      expect((await guard.release(holder)).ours).toBe(true);
      const first = await Promise.race(waiters);
      await guard.commit(acquired(first), Buffer.from('second try'));
      const outcomes = await Promise.all(waiters);
      expect(outcomes.filter((o) => o.kind === 'acquired')).toHaveLength(1);
      expect(outcomes.filter((o) => o.kind === 'fast-forward')).toHaveLength(2);
    } finally {
      hub.close();
    }
  }, 60_000);

  it('waiters on scopes spread over every master, on one shared subscriber, are all woken', async () => {
    const hub = new WakeHub(cluster);
    try {
      const targets = Array.from({ length: 30 }, () => ({ scope: `s-${randomUUID()}`, step: 'dispatch', jobType: 'summary' }));
      const holders = await Promise.all(targets.map(async (t) => acquired(await guard.acquire(t))));
      const waiters = (await Promise.all(targets.map((t) => sleepingWaiters(hub, t, 2)))).flat();
      await Promise.all(holders.map((lease) => guard.commit(lease, Buffer.from(lease.target.scope))));
      const outcomes = await Promise.all(waiters);
      expect(outcomes.every((o) => o.kind === 'fast-forward')).toBe(true);
    } finally {
      hub.close();
    }
  }, 60_000);

  describe('through Temporal, with worker processes that poll only every 60 s', () => {
    const workerPrefix = testPrefix('cwake-int');
    let workers: ClusterWorkers;

    beforeAll(async () => {
      workers = await startClusterWorkers(workerPrefix, { pollIntervalMs: 60_000, bothPrebuilt: true, countWakes: true });
    }, 180_000);
    afterAll(async () => {
      await workers?.stop();
      await deletePrefixOnCluster(cluster, workerPrefix);
    });

    // A waiter that is not woken sleeps until just before its 60 s start-to-close, so the runs
    // would still pass, only late; what proves the wake-ups is that every waiter that listened
    // before the commit was rung by its message (counted by the worker processes: COUNT_WAKES).
    it('10 racing runs of one scope get the one result, and every waiter listening before the commit was rung', async () => {
      const scope = `session-${randomUUID()}`;
      const handles = await Promise.all(
        Array.from({ length: 10 }, () =>
          workers.client.workflow.start('guardedRun', { taskQueue: workers.taskQueue, workflowId: `wake-${randomUUID()}`, args: [scope, scope, 3_000] }),
        ),
      );
      const results = (await resultsWithin(handles, 150_000)) as JobResult[];
      expect(new Set(results.map((r) => r.nonce)).size).toBe(1);
      expect(Number(await cluster.get(counterKey(workerPrefix, scope)))).toBe(1);
      const joined = Number(await cluster.get(`${workerPrefix}:wake-joins`));
      const rung = (await cluster.smembers(`${workerPrefix}:wake-rung`)).map(Number);
      const late = (await cluster.smembers(`${workerPrefix}:wake-late`)).map(Number);
      expect(rung.length).toBeGreaterThan(0);
      const unaccounted = Array.from({ length: joined }, (_, i) => i + 1).filter((id) => !rung.includes(id) && !late.includes(id));
      expect(unaccounted).toEqual([]);
    });

    /**
     * The runs' results, or, past `ms` (the runs end within a start-to-close of 60 s even if a
     * wake-up is lost), an error that says where each run stands and how the workers are.
     */
    async function resultsWithin(handles: WorkflowHandle[], ms: number): Promise<unknown[]> {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), ms)));
      const results = Promise.all(handles.map((h) => h.result()));
      try {
        const first = await Promise.race([results, late]);
        if (first !== 'late') return first;
      } finally {
        clearTimeout(timer);
      }
      results.catch(() => undefined); // a run that fails after this is in the report below
      const runs = await Promise.all(
        handles.map(async (h) => {
          const { status, raw } = await h.describe();
          const pending = (raw.pendingActivities ?? []).map((a) => ({ state: a.state, attempt: a.attempt, lastFailure: a.lastFailure?.message }));
          // A run whose workflow task fails is retried forever and never ends: name the last events.
          const events = (await h.fetchHistory()).events ?? [];
          const last = events.slice(-4).map((e) => temporal.api.enums.v1.EventType[e.eventType ?? 0]);
          const taskFailure = events.filter((e) => e.workflowTaskFailedEventAttributes).pop()?.workflowTaskFailedEventAttributes?.failure?.message;
          return `${h.workflowId}: ${status.name} ${JSON.stringify(pending)}; last events ${JSON.stringify(last)}${taskFailure ? `; workflow task failed: ${taskFailure}` : ''}`;
        }),
      );
      throw new Error(`the runs did not end within ${ms} ms:\n${runs.join('\n')}\n${workers.health()}`);
    }
  });
});
