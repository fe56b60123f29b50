import { randomBytes } from 'node:crypto';
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { NativeConnection, Worker, type WorkerOptions, type WorkflowBundle } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import * as head from '../../src';
import { FireOnceKeys } from '../../src/core';
import { connectRedis, deletePrefix, readCount, testPrefix } from '../support/redis';
import { RELEASE_0_9_0, buildRelease, releaseUnavailable } from '../support/release-build';
import { quietTemporalLogs } from '../support/sample-harness';
import { holdHandOff } from '../support/hold-hand-off';
import { waitFor } from '../support/wait';
import { bundleCompatWorkflows } from './bundle';
import { compatActivities, counterKey, gateKey } from './fixtures/activities';
import type { CancelOutcome } from './fixtures/workflows';

// A fleet mid-upgrade from 0.9.0 to 0.10.0 meets the patch temporal-fire-once-hand-off-cancel
// (docs/upgrading.md): a HEAD worker ends a local activity cancelled across the hand-off of its
// wait under the patch, and a 0.9.0 worker then takes the workflow's next task. The rest of a
// mixed fleet is mixed-fleet.test.ts's, with 0.8.0; this is the one case 0.9.0 adds. The 0.9.0
// workers run the release built from its last commit (test/support/release-build.ts).

const release = RELEASE_0_9_0;
const unavailable = releaseUnavailable(release);
if (unavailable !== undefined) console.warn(`test/compat/hand-off-cancel-fleet.test.ts is skipped: ${unavailable}`);

type Side = 'old' | 'head';

(unavailable === undefined ? describe : describe.skip)(`workers of ${release.version} and HEAD on one task queue, across the hand-off-cancel patch`, () => {
  let old: typeof head;
  const bundles: Partial<Record<Side, WorkflowBundle>> = {};
  let redis: Redis;
  let connection: Connection;
  let native: NativeConnection;
  let client: Client;
  const prefix = testPrefix('compat-cancel');
  const queue = `compat-cancel-${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    quietTemporalLogs('ERROR');
    old = (await (await buildRelease(release)).load('index')) as typeof head;
    [bundles.old, bundles.head] = await Promise.all([bundleCompatWorkflows(await buildRelease(release)), bundleCompatWorkflows()]);
    redis = connectRedis();
    connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS });
    client = new Client({ connection });
    native = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS });
  }, 180_000);

  afterAll(async () => {
    await deletePrefix(redis, prefix);
    redis.disconnect();
    await connection?.close();
    await native?.close();
  });

  /**
   * A worker of `side`'s release on `taskQueue`. A workflow task meant for its sticky queue once it
   * has stopped goes to `taskQueue` after 1 s, not 10.
   */
  function worker(side: Side, taskQueue: string, options: Partial<WorkerOptions> = {}): Promise<Worker> {
    const lib = side === 'old' ? old : head;
    return Worker.create({
      connection: native,
      taskQueue,
      identity: `${side === 'old' ? release.version : 'HEAD'}@${taskQueue}`,
      workflowBundle: bundles[side]!,
      activities: compatActivities(lib.fireOnce, redis, prefix, side === 'old' ? release.version : 'HEAD'),
      plugins: [new lib.FireOncePlugin({ redis, keyPrefix: prefix, pollIntervalMs: 50 })],
      stickyQueueScheduleToStartTimeout: '1s',
      ...options,
    });
  }

  const heldKey = (scope: string) => `${prefix}:held:${scope}`;
  const subscribers = async (scope: string) => Number(((await redis.pubsub('NUMSUB', new FireOnceKeys(prefix).wakeChannel(scope))) as [string, number])[1]);
  const events = async (handle: WorkflowHandle) => (await handle.fetchHistory()).events ?? [];

  it("a local activity a HEAD worker ended cancelled under the patch: a 0.9.0 worker fails the workflow's next task (nondeterminism at the patch marker), a HEAD worker then completes it", async () => {
    const scope = 'cancelled-across';
    // The holder, on a HEAD worker of its own queue, runs until the gate opens.
    const holderWorker = await worker('head', `${queue}-holder`);
    const holderRun = holderWorker.run();
    const holder = await client.workflow.start('queuedRun', {
      taskQueue: `${queue}-holder`,
      workflowId: `holder-${randomBytes(4).toString('hex')}`,
      args: [scope, `${queue}-holder`, false],
    });
    await waitFor('the holder to dispatch', async () => (await readCount(redis, counterKey(prefix, 'gatedJob', scope))) === 1);

    // A HEAD worker alone on the queue: its local activity waits in its slot, the worker begins to
    // stop, and the cancel reaches the activity after the shutdown ended its wait.
    const stopping = await worker('head', queue, { shutdownGraceTime: '30s', interceptors: { activity: [holdHandOff(redis, heldKey)] } });
    const stoppingRun = stopping.run();
    const waiter = await client.workflow.start('cancelledLocalRun', {
      taskQueue: queue,
      workflowId: `waiter-${randomBytes(4).toString('hex')}`,
      args: [scope],
      workflowTaskTimeout: '2s',
    });
    await waitFor('the local activity to wait in its slot', async () => (await subscribers(scope)) === 1);
    stopping.shutdown();
    await waitFor("the guard's FireOnceWorkerShutdown, held", async () => (await redis.exists(heldKey(scope))) === 1);
    await waiter.signal('cancel');
    await stoppingRun;
    const patchMarker = (await events(waiter)).some((e) => e.markerRecordedEventAttributes?.markerName === 'core_patch');

    // A 0.9.0 worker alone on the queue takes the workflow's next task, the `finish` signal's.
    const oldWorker = await worker('old', queue);
    const oldSaw = await oldWorker.runUntil(async () => {
      await waiter.signal('finish');
      return waitFor('the 0.9.0 worker to complete or fail the workflow task', async () => {
        const all = await events(waiter);
        const failed = all.find((e) => e.workflowTaskFailedEventAttributes)?.workflowTaskFailedEventAttributes?.failure?.message;
        if (failed) return { failed };
        if (all.some((e) => e.workflowExecutionCompletedEventAttributes)) return { completed: await waiter.result() };
        return undefined;
      });
    });
    // A HEAD worker takes the workflow on, and ends it with what the workflow saw under the patch.
    const saw = await (await worker('head', queue)).runUntil(() => waiter.result() as Promise<CancelOutcome>);
    await redis.set(gateKey(prefix, scope), 'open');
    await holder.result();
    holderWorker.shutdown();
    await holderRun;
    expect({ patchMarker, oldSaw, saw, dispatches: await readCount(redis, counterKey(prefix, 'gatedJob', scope)) }).toEqual({
      patchMarker: true,
      oldSaw: { failed: expect.stringMatching(/Nondeterminism error: Non-deprecated patch marker encountered for change temporal-fire-once-hand-off-cancel/) },
      saw: { error: 'ActivityFailure', message: 'Local Activity cancelled', cause: 'CancelledFailure' },
      dispatches: 1,
    });
  });
});
