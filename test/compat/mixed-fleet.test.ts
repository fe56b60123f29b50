import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { NativeConnection, Worker, type WorkerOptions, type WorkflowBundle } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import * as head from '../../src';
import { FireOnceKeys } from '../../src/core';
import { runCli } from '../cli/run-cli';
import { connectRedis, deletePrefix, readCount, testPrefix } from '../support/redis';
import { RELEASE_0_8_0, buildRelease, releaseUnavailable, type ReleaseBuild } from '../support/release-build';
import { quietTemporalLogs } from '../support/sample-harness';
import { waitFor } from '../support/wait';
import { bundleCompatWorkflows } from './bundle';
import { compatActivities, counterKey, dispatchedByKey, gateKey, type JobResult } from './fixtures/activities';
import type * as workflows from './fixtures/workflows';

// Users upgrade a fleet one worker at a time, so for a while workers of 0.8.0 and of HEAD share
// one Redis and one task queue. Here they race on the same steps, wait for each other both ways,
// hand a failed step over, drop from a local cache what the other invalidates, write one dispatch
// log that both releases' reports read, and leave histories that both replay, but for a local
// wait a HEAD worker handed over as it stopped, which a 0.8.0 worker cannot replay
// (docs/upgrading.md). The 0.8.0 workers run the release built from its commit
// (test/support/release-build.ts, cached in node_modules/.cache: about 10 s the first time).

const release = RELEASE_0_8_0;
const unavailable = releaseUnavailable(release);
if (unavailable !== undefined) console.warn(`test/compat/mixed-fleet.test.ts is skipped: ${unavailable}`);

type Side = 'old' | 'head';
/** Each release on each end of a scenario: 0.8.0 then HEAD, and HEAD then 0.8.0. */
const BOTH_WAYS: readonly (readonly [Side, Side])[] = [
  ['old', 'head'],
  ['head', 'old'],
];
type Workflows = typeof workflows;
type Report = {
  events: number;
  byScope: { scope: string; counts: Record<string, number> }[];
  duplicates: { scope: string; step: string; dispatches: { workflowId: string; outcome?: string }[] }[];
};

(unavailable === undefined ? describe : describe.skip)(`a fleet of ${release.version} and HEAD workers on one Redis and one task queue`, () => {
  let build: ReleaseBuild;
  let old: typeof head;
  const bundles: Partial<Record<Side, WorkflowBundle>> = {};
  let redis: Redis;
  let connection: Connection;
  /** One per release: the SDK lets only one worker per connection poll a task queue. */
  const nativeConnections: Partial<Record<Side, NativeConnection>> = {};
  let client: Client;
  const prefix = testPrefix('compat-fleet');
  const keys = new FireOnceKeys(prefix);
  const shared = `compat-fleet-${randomBytes(4).toString('hex')}`;
  /** A task queue only one side's worker polls, so that a test can choose the release of a run. */
  const own = (side: Side) => `${shared}-${side}`;
  const versionOf = (side: Side) => (side === 'old' ? release.version : 'HEAD');
  const started: WorkflowHandle[] = [];

  /** The fleet: both releases on the shared task queue, and each on its own; it runs from beforeAll to afterAll. */
  const FLEET = [
    ['old', shared],
    ['head', shared],
    ['old', own('old')],
    ['head', own('head')],
  ] as const;
  const fleet: { worker: Worker; plugin: head.FireOncePlugin }[] = [];
  let fleetRuns: Promise<unknown> | undefined;

  beforeAll(async () => {
    quietTemporalLogs('ERROR');
    build = await buildRelease(release);
    old = (await build.load('index')) as typeof head;
    [bundles.old, bundles.head] = await Promise.all([bundleCompatWorkflows(build), bundleCompatWorkflows()]);
    redis = connectRedis();
    connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS });
    client = new Client({ connection });
    for (const side of ['old', 'head'] as const) nativeConnections[side] = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS });
    for (const [side, queue] of FLEET) fleet.push(await fleetWorker(side, queue));
    fleetRuns = Promise.all(fleet.map(({ worker }) => worker.run()));
    fleetRuns.catch(() => undefined); // each scenario races it, and afterAll awaits it
  }, 180_000);

  afterAll(async () => {
    for (const { worker } of fleet) if (worker.getState() === 'RUNNING') worker.shutdown();
    await fleetRuns?.catch(() => undefined);
    await deletePrefix(redis, prefix);
    redis.disconnect();
    await connection?.close();
    for (const native of Object.values(nativeConnections)) await native.close();
  });

  /** A worker of `side`'s release on `taskQueue`: its plugin, its workflow interceptors, its `fireOnce` marks. */
  async function fleetWorker(
    side: Side,
    taskQueue: string,
    options: Partial<WorkerOptions> = {},
    pluginOptions: { localCache?: boolean } = {},
  ): Promise<{ worker: Worker; plugin: head.FireOncePlugin }> {
    const lib = side === 'old' ? old : head;
    const plugin = new lib.FireOncePlugin({ redis, keyPrefix: prefix, pollIntervalMs: 50, ...pluginOptions });
    const worker = await Worker.create({
      connection: nativeConnections[side]!,
      taskQueue,
      identity: `${versionOf(side)}@${taskQueue}`,
      workflowBundle: bundles[side]!,
      activities: compatActivities(lib.fireOnce, redis, prefix, versionOf(side)),
      plugins: [plugin],
      ...options,
    });
    return { worker, plugin };
  }

  /** Run `scenario` on the fleet; fail at once if a worker of the fleet stops. */
  function withFleet<T>(scenario: () => Promise<T>): Promise<T> {
    const stopped = fleetRuns!.then(() => {
      throw new Error('a worker of the fleet stopped');
    });
    return Promise.race([scenario(), stopped]);
  }

  /**
   * Run `scenario` on one worker of `side` alone on `taskQueue`, then stop it. A workflow task
   * meant for its sticky queue once it has stopped goes to `taskQueue` after 1 s, not 10.
   */
  async function alone<T>(side: Side, taskQueue: string, scenario: () => Promise<T>): Promise<T> {
    return (await fleetWorker(side, taskQueue, { stickyQueueScheduleToStartTimeout: '1s' })).worker.runUntil(scenario());
  }

  async function start<W extends keyof Workflows>(workflow: W, args: Parameters<Workflows[W]>, taskQueue: string): Promise<WorkflowHandle> {
    const handle = await client.workflow.start(workflow, { taskQueue, workflowId: `${workflow}-${randomBytes(4).toString('hex')}`, args } as never);
    started.push(handle);
    return handle;
  }

  const results = (handles: readonly WorkflowHandle[]) => Promise.all(handles.map((h) => h.result() as Promise<JobResult>));

  /** The log's decisions in `scope`, by workflow ID. */
  async function decisions(scope: string): Promise<Record<string, string[]>> {
    const byWorkflow: Record<string, string[]> = {};
    for (const [, fields] of await redis.xrange(keys.log(), '-', '+')) {
      const entry: Record<string, string> = {};
      for (let i = 0; i < fields.length; i += 2) entry[fields[i]!] = fields[i + 1]!;
      if (entry.scope === scope) (byWorkflow[entry.workflowId ?? ''] ??= []).push(entry.decision!);
    }
    return byWorkflow;
  }

  /** Send what the fleet's dispatch logs hold, as a worker does when it stops. */
  const flushLogs = () => Promise.all(fleet.map(({ plugin }) => plugin.dispatchLog?.flush()));

  /** How many connections listen on `scope`'s wake channel: a waiter in its slot does (a parked one, and the holder, do not). */
  const subscribers = async (scope: string) => Number(((await redis.pubsub('NUMSUB', keys.wakeChannel(scope))) as [string, number])[1]);

  /** What the guarantee leaves in `scope`: the distinct results, the dispatches by release, and the guard's keys still there. */
  async function outcome(scope: string, step: 'dispatchJob' | 'gatedJob', all: readonly JobResult[]) {
    return {
      results: new Set(all.map((r) => `${r.scope}/${r.nonce}`)).size,
      dispatches: await readCount(redis, counterKey(prefix, step, scope)),
      dispatchedBy: await redis.lrange(dispatchedByKey(prefix, scope), 0, -1),
      left: await redis.exists(keys.lock(scope, step), keys.waiters(scope, step)),
    };
  }

  it('race on the same steps, on the shared task queue and on each release own: 1 dispatch per step, every run its result, no lock left', async () => {
    const scopes = ['race-1', 'race-2', 'race-3'];
    const outcomes = await withFleet(async () => {
      const runs = await Promise.all(
        scopes.map(async (scope) =>
          Promise.all([
            ...[shared, shared, own('old'), own('head')].map((queue) => start('guardedRun', [scope, 200], queue)),
            ...[shared, shared, own('old'), own('head')].map((queue) => start('localRun', [scope, 200], queue)),
          ]),
        ),
      );
      return Promise.all(runs.map(async (handles, i) => outcome(scopes[i]!, 'dispatchJob', await results(handles))));
    });
    for (const { dispatchedBy, ...rest } of outcomes) {
      expect(rest).toEqual({ results: 1, dispatches: 1, left: 0 });
      expect(dispatchedBy).toHaveLength(1);
    }
  });

  describe.each(BOTH_WAYS)('a %s holder, waiters on %s', (holderSide, waiterSide) => {
    it('a parked waiter and a local one in its slot get the holder result: 1 dispatch, no lock left', async () => {
      const scope = `${holderSide}-holds`;
      const { all, logged, holder, parked, local } = await withFleet(async () => {
        const holder = await start('queuedRun', [scope, own(holderSide), false], own(holderSide));
        await waitFor('the holder to dispatch', async () => (await readCount(redis, counterKey(prefix, 'gatedJob', scope))) === 1);
        const parked = await start('queuedRun', [scope, own(waiterSide), false], own(waiterSide));
        const local = await start('queuedRun', [scope, own(waiterSide), true], own(waiterSide));
        await waitFor('one waiter to park', async () => !!(await decisions(scope))[parked.workflowId]?.includes('in-flight-parked'));
        await waitFor('the other to wait in its slot, on the wake channel', async () => (await subscribers(scope)) === 1);
        await redis.set(gateKey(prefix, scope), 'open');
        const all = await results([holder, parked, local]);
        await flushLogs();
        return { all, logged: await decisions(scope), holder, parked, local };
      });
      expect(await outcome(scope, 'gatedJob', all)).toEqual({ results: 1, dispatches: 1, dispatchedBy: [`${versionOf(holderSide)}:gatedJob`], left: 0 });
      // One log, written by both: the holder's dispatch and commit, the waiters' waits.
      expect(logged[holder.workflowId]).toEqual(['dispatched', 'committed']);
      expect(logged[parked.workflowId]).toEqual(['in-flight-parked']);
      expect(logged[local.workflowId]).toEqual(['in-flight-waited', 'fast-forwarded']);
    });

    it("the holder's first dispatch fails: its release hands the step over, one dispatch succeeds, every run gets its result", async () => {
      const scope = `${holderSide}-fails`;
      const all = await withFleet(async () => {
        const holder = await start('queuedRun', [scope, own(holderSide), false], own(holderSide));
        await waitFor('the holder to dispatch', async () => (await readCount(redis, counterKey(prefix, 'gatedJob', scope))) === 1);
        const waiters = [
          await start('queuedRun', [scope, own(waiterSide), false], own(waiterSide)),
          await start('queuedRun', [scope, own(waiterSide), true], own(waiterSide)),
        ];
        await waitFor('one waiter to park', async () => (await decisions(scope))[waiters[0]!.workflowId]?.includes('in-flight-parked') === true);
        await waitFor('the other to wait in its slot', async () => (await subscribers(scope)) === 1);
        await redis.set(gateKey(prefix, scope), 'fail-first');
        return results([holder, ...waiters]);
      });
      const { dispatchedBy, ...rest } = await outcome(scope, 'gatedJob', all);
      expect(rest).toEqual({ results: 1, dispatches: 2, left: 0 });
      expect(dispatchedBy[0]).toBe(`${versionOf(holderSide)}:gatedJob`); // the one that failed
    });
  });

  it.each(BOTH_WAYS)(
    "a result invalidated by %s's plugin is dispatched again by %s's worker: once more, and no duplicate in the log",
    async (invalidator, dispatcher) => {
      const scope = `invalidated-by-${invalidator}`;
      const all = await withFleet(async () => {
        const first = await (await start('guardedRun', [scope, 0], own(dispatcher))).result();
        // The dispatch's entries go to the log before the invalidation's: 0.8.0's report orders
        // them by where they landed, and would count a late one after it (defect 146).
        await flushLogs();
        const lib = invalidator === 'old' ? old : head;
        const plugin = new lib.FireOncePlugin({ redis, keyPrefix: prefix });
        expect(await plugin.invalidate(scope, 'dispatchJob', 'default')).toBe(true);
        await plugin.dispatchLog!.flush();
        return [first, await (await start('guardedRun', [scope, 0], own(dispatcher))).result()] as JobResult[];
      });
      const { dispatchedBy, ...rest } = await outcome(scope, 'dispatchJob', all);
      expect(rest).toEqual({ results: 2, dispatches: 2, left: 0 });
      expect(dispatchedBy).toEqual([`${versionOf(dispatcher)}:dispatchJob`, `${versionOf(dispatcher)}:dispatchJob`]);
    },
  );

  it.each(BOTH_WAYS)(
    "a result in the local cache of %s's worker is dropped when %s's plugin invalidates it: the next run dispatches again",
    async (cacher, invalidator) => {
      const scope = `cached-by-${cacher}`;
      const queue = `${shared}-cache-${cacher}`;
      const { worker, plugin } = await fleetWorker(cacher, queue, {}, { localCache: true });
      const all = await withFleet(() =>
        worker.runUntil(async () => {
          const run = async () => (await start('guardedRun', [scope, 0], queue)).result() as Promise<JobResult>;
          const [first, again] = [await run(), await run()];
          expect(plugin.cache!.size).toBe(1);
          await plugin.dispatchLog!.flush(); // the dispatch's entries before the invalidation's (defect 146)
          const other = new (invalidator === 'old' ? old : head).FireOncePlugin({ redis, keyPrefix: prefix });
          expect(await other.invalidate(scope, 'dispatchJob', 'default')).toBe(true);
          await other.dispatchLog!.flush();
          await waitFor("the other release's invalidation to reach the cache", async () => plugin.cache!.size === 0);
          return [first, again, await run()];
        }),
      );
      expect(all[1]).toEqual(all[0]);
      const { dispatchedBy, ...rest } = await outcome(scope, 'dispatchJob', all);
      expect(rest).toEqual({ results: 2, dispatches: 2, left: 0 });
      expect(dispatchedBy).toEqual([`${versionOf(cacher)}:dispatchJob`, `${versionOf(cacher)}:dispatchJob`]);
    },
  );

  let handedOver: WorkflowHandle | undefined;

  it("a local wait that a HEAD worker hands over as it stops: a 0.8.0 worker fails the workflow's next task (nondeterminism), a HEAD worker then completes it", async () => {
    const scope = 'handed-over';
    const queue = `${shared}-hand-over`;
    const holder = await withFleet(async () => {
      const holder = await start('queuedRun', [scope, own('old'), false], own('old'));
      await waitFor('the holder to dispatch', async () => (await readCount(redis, counterKey(prefix, 'gatedJob', scope))) === 1);
      return holder;
    });
    // A HEAD worker alone on its queue runs the waiter's local activity, which waits in its slot, and stops.
    const waiter = await alone('head', queue, async () => {
      const waiter = await start('queuedRun', [scope, queue, true], queue);
      await waitFor('the local activity to wait in its slot', async () => (await subscribers(scope)) === 1);
      return waiter;
    });
    // The stopping worker scheduled it again behind the hand-off's timer.
    expect(((await waiter.fetchHistory()).events ?? []).some((e) => e.timerStartedEventAttributes)).toBe(true);
    // A 0.8.0 worker alone takes the timer's workflow task: its workflow interceptor knows no hand-off.
    const failure = await alone('old', queue, async () => {
      let message: string | undefined;
      await waitFor('the 0.8.0 worker to fail the workflow task', async () => {
        const failed = ((await waiter.fetchHistory()).events ?? []).find((e) => e.workflowTaskFailedEventAttributes);
        message = failed?.workflowTaskFailedEventAttributes?.failure?.message ?? undefined;
        return message !== undefined;
      });
      return message;
    });
    expect(failure).toMatch(/Nondeterminism error/);
    // A HEAD worker takes the workflow on: the local activity waits again, and gets the holder's result.
    const all = await withFleet(() =>
      alone('head', queue, async () => {
        await waitFor('the local activity to wait again, on a HEAD worker', async () => (await subscribers(scope)) === 1);
        await redis.set(gateKey(prefix, scope), 'open');
        return results([holder, waiter]);
      }),
    );
    expect(await outcome(scope, 'gatedJob', all)).toEqual({ results: 1, dispatches: 1, dispatchedBy: ['0.8.0:gatedJob'], left: 0 });
    handedOver = waiter;
  });

  it("fire-once report, HEAD's and 0.8.0's, reads the entries of both releases: a dispatch per step, and the steps whose first dispatch failed", async () => {
    await flushLogs();
    const xlen = await redis.xlen(keys.log());
    const reports: Record<Side, Report> = {} as never;
    const args = ['report', '--prefix', prefix, '--redis', process.env.REDIS_URL!, '--json'];
    const headRun = await runCli(args);
    expect({ code: headRun.code, stderr: headRun.stderr }).toEqual({ code: 1, stderr: '' }); // 1: duplicates
    reports.head = JSON.parse(headRun.stdout) as Report;
    const oldRun = await promisify(execFile)(process.execPath, [join(build.dir, 'dist', 'cli', 'main.js'), ...args]).then(
      () => ({ code: 0, stdout: '', stderr: '' }),
      (err: { code: number; stdout: string; stderr: string }) => err,
    );
    expect({ code: oldRun.code, stderr: oldRun.stderr }).toEqual({ code: 1, stderr: '' });
    reports.old = JSON.parse(oldRun.stdout) as Report;
    const duplicates: Partial<Record<Side, unknown>> = {};
    for (const side of ['head', 'old'] as const) {
      const report = reports[side];
      expect(report.events).toBe(xlen);
      const counts = (scope: string) => report.byScope.find((s) => s.scope === scope)?.counts ?? {};
      for (const scope of ['race-1', 'race-2', 'race-3', 'old-holds', 'head-holds']) expect(counts(scope).dispatched).toBe(1);
      // Written by both releases: the holder's dispatch and commit by one, the waits by the other.
      for (const scope of ['old-holds', 'head-holds'])
        expect(counts(scope)).toMatchObject({ dispatched: 1, committed: 1, 'in-flight-parked': 1, 'in-flight-waited': 1 });
      // An invalidation (with redisTime from HEAD, without from 0.8.0) before the next dispatch: no duplicate.
      for (const scope of ['invalidated-by-old', 'invalidated-by-head', 'cached-by-old', 'cached-by-head'])
        expect(counts(scope)).toMatchObject({ dispatched: 2, invalidated: 1 });
      duplicates[side] = report.duplicates.map((d) => [d.scope, d.dispatches.map((x) => x.outcome)]);
    }
    const failedFirst = [
      ['head-fails', ['released-on-failure', 'committed']],
      ['old-fails', ['released-on-failure', 'committed']],
    ];
    expect(duplicates).toEqual({ head: failedFirst, old: failedFirst });
  });

  it("every history the fleet left replays on HEAD; on 0.8.0, all but the hand-off's (docs/upgrading.md)", async () => {
    expect(started.length).toBeGreaterThan(30);
    const histories = await Promise.all(started.map(async (h) => ({ workflowId: h.workflowId, history: await h.fetchHistory() })));
    const failed: Record<Side, string[]> = { head: [], old: [] };
    for (const side of ['head', 'old'] as const) {
      for await (const { workflowId, error } of Worker.runReplayHistories({ workflowBundle: bundles[side]!, replayName: `compat-fleet-${side}` }, histories)) {
        if (error !== undefined) failed[side].push(`${workflowId}: ${(error as Error).name}`);
      }
    }
    expect(failed).toEqual({ head: [], old: [`${handedOver?.workflowId}: DeterminismViolationError`] });
  });
});
