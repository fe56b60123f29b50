// Records the histories of test/fixtures/histories-<version>/ts with a worker of an earlier
// release, built from git history: `npx tsx test/compat/record-histories.ts <version>` (0.8.0,
// 0.9.0, 0.10.0: test/support/release-build.ts's RECORDED_RELEASES). Starts its
// own Redis and Temporal dev server (or uses REDIS_URL and TEMPORAL_ADDRESS), runs each shape of
// test/compat/fixtures/workflows.ts once, checks that it did what the shape is for (one
// dispatch, a parked waiter, a local retry behind a timer...), and writes the histories.
// test/compat/replay.test.ts replays them with HEAD's plugin.
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client, Connection, type WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { DefaultLogger, NativeConnection, Runtime, Worker, type WorkerOptions } from '@temporalio/worker';
import { Redis } from 'ioredis';
import { withRedisAndTemporal } from '../../sample-workflows/services';
import type * as head from '../../src';
import { FireOnceKeys } from '../../src/core';
import { RECORDED_RELEASES, buildRelease, type ReleaseBuild } from '../support/release-build';
import { holdHandOff } from '../support/hold-hand-off';
import { waitFor } from '../support/wait';
import { bundleCompatWorkflows } from './bundle';
import { historiesDir, type History } from './histories';
import { compatActivities, counterKey, gateKey, type JobName, type JobResult } from './fixtures/activities';
import type * as workflows from './fixtures/workflows';

type Workflows = typeof workflows;

interface Recorder {
  /** The release recording. */
  readonly version: string;
  readonly client: Client;
  readonly redis: Redis;
  readonly prefix: string;
  readonly taskQueue: string;
  start<W extends keyof Workflows>(
    workflow: W,
    args: Parameters<Workflows[W]>,
    options?: { workflowTaskTimeout?: string; taskQueue?: string },
  ): Promise<WorkflowHandleWithFirstExecutionRunId>;
  count(job: JobName, scope: string): Promise<number>;
  decisions(scope: string): Promise<string[]>;
  save(name: string, history: History): void;
  /** A worker of the release on a task queue of its own, not yet running. */
  worker(taskQueue: string, options?: Partial<WorkerOptions>): Promise<Worker>;
  /** How many connections listen on `scope`'s wake channel: a local activity waiting in its slot does. */
  subscribers(scope: string): Promise<number>;
}

function check(what: string, ok: boolean, detail: unknown): void {
  if (!ok) throw new Error(`recording: ${what} (${JSON.stringify(detail)})`);
  console.log(`  ok: ${what}`);
}

const nonces = (results: readonly JobResult[]) => new Set(results.map((r) => r.nonce)).size;

/**
 * Two runs of `workflow` in one scope, the second started once the first has dispatched: one
 * dispatch, and the waiter's `decision` (`in-flight-parked`, or a local activity's
 * `in-flight-waited` in its slot). Saved as `<name>-holder` and `<name>-waiter`.
 */
async function holderAndWaiter(r: Recorder, workflow: 'guardedRun' | 'localRun', name: string, decision: string): Promise<void> {
  const scope = name;
  const holder = await r.start(workflow, [scope, 1500]);
  await waitFor('the holder to dispatch', async () => (await r.count('dispatchJob', scope)) === 1);
  const waiter = await r.start(workflow, [scope, 1500]);
  const results = [(await holder.result()) as JobResult, (await waiter.result()) as JobResult];
  const decisions = await r.decisions(scope);
  check(
    `one dispatch, one waiter (${decision}), one result`,
    nonces(results) === 1 && (await r.count('dispatchJob', scope)) === 1 && decisions.includes(decision),
    decisions,
  );
  r.save(`${name}-holder`, await holder.fetchHistory());
  r.save(`${name}-waiter`, await waiter.fetchHistory());
}

/**
 * A holder of `scope`'s gated job on the recorder's worker, and `waiter` on a task queue of its
 * own, whose local activity waits in its slot for it on a worker that `stop` stops: the hand-off of
 * its wait (0.9.0 on). Then another worker takes the waiter on; `finish` says when to open the gate.
 */
async function handedOff(
  r: Recorder,
  scope: string,
  waiter: (queue: string) => Promise<WorkflowHandleWithFirstExecutionRunId>,
  stop: (worker: Worker, waiter: WorkflowHandleWithFirstExecutionRunId) => Promise<void>,
  finish: (waiter: WorkflowHandleWithFirstExecutionRunId) => Promise<unknown>,
  options: Partial<WorkerOptions> = {},
): Promise<{ holder: JobResult; waiter: WorkflowHandleWithFirstExecutionRunId }> {
  const queue = `${r.taskQueue}-${scope}`;
  const holder = await r.start('queuedRun', [scope, r.taskQueue, false]);
  await waitFor('the holder to dispatch', async () => (await r.count('gatedJob', scope)) === 1);
  // A workflow task meant for the stopped worker's sticky queue goes to `queue` after 1 s, not 10.
  const stopping = await r.worker(queue, { stickyQueueScheduleToStartTimeout: '1s', ...options });
  const running = stopping.run();
  const handle = await waiter(queue);
  await waitFor('the local activity to wait in its slot', async () => (await r.subscribers(scope)) === 1);
  await stop(stopping, handle);
  await running;
  const next = await r.worker(queue);
  await next.runUntil(async () => {
    await finish(handle);
    await r.redis.set(gateKey(r.prefix, scope), 'open');
    await handle.result();
  });
  return { holder: (await holder.result()) as JobResult, waiter: handle };
}

const timers = (history: History) => (history.events ?? []).filter((e) => e.timerStartedEventAttributes).length;

/** The shapes of the hand-off (0.9.0 on): a local activity's wait handed off as its worker stops, and a cancel across it. */
const HAND_OFF_SHAPES: Record<string, (r: Recorder) => Promise<void>> = {
  async handOff(r) {
    const scope = 'handed-off';
    const { holder, waiter } = await handedOff(
      r,
      scope,
      (queue) => r.start('queuedRun', [scope, queue, true], { taskQueue: queue }),
      async (worker) => worker.shutdown(),
      // Once the local activity waits again, on the next worker.
      () => waitFor('the local activity to wait again', async () => (await r.subscribers(scope)) === 1),
    );
    const history = await waiter.fetchHistory();
    const result = (await waiter.result()) as JobResult;
    check(
      'the wait was handed off behind a timer, then got the holder result: 1 dispatch',
      timers(history) === 1 && result.nonce === holder.nonce && (await r.count('gatedJob', scope)) === 1,
      {
        timers: timers(history),
      },
    );
    r.save('local-handed-off', history);
  },

  async cancelledHandOff(r) {
    // WAIT_CANCELLATION_COMPLETED, the cancel reaching the local activity after its worker's
    // shutdown ended its wait: what the patch temporal-fire-once-hand-off-cancel changes.
    const scope = 'cancelled-handed-off';
    const held = `${r.prefix}:held:${scope}`;
    const { waiter } = await handedOff(
      r,
      scope,
      // A workflow task timeout of 2 s lets the signal in while the local activity runs (core heartbeats the task).
      (queue) => r.start('cancelledLocalRun', [scope], { taskQueue: queue, workflowTaskTimeout: '2s' }),
      async (worker, handle) => {
        worker.shutdown();
        await waitFor("the guard's FireOnceWorkerShutdown, held", async () => (await r.redis.exists(held)) === 1);
        await handle.signal('cancel');
      },
      async (handle) => handle.signal('finish'),
      // A long grace time: the SDK cancels no activity of its own before the recorder's cancel.
      { shutdownGraceTime: '30s', interceptors: { activity: [holdHandOff(r.redis, () => held)] } },
    );
    const outcome = (await waiter.result()) as workflows.CancelOutcome;
    const history = await waiter.fetchHistory();
    const patched = (history.events ?? []).some((e) => e.markerRecordedEventAttributes?.markerName === 'core_patch');
    const dispatches = await r.count('gatedJob', scope);
    if (r.version === '0.9.0') {
      // Before the patch: the scope's bare CancelledFailure (defect 170).
      check(
        'the cancel came after the hand-off failure, no patch marker, 1 dispatch',
        outcome.error === 'CancelledFailure' && !patched && dispatches === 1,
        outcome,
      );
    } else {
      check(
        'the cancel came after the hand-off failure, under the patch: the local activity ended cancelled, 1 dispatch',
        outcome.error === 'ActivityFailure' && outcome.cause === 'CancelledFailure' && patched && dispatches === 1,
        outcome,
      );
    }
    r.save('local-cancelled-handed-off', history);
  },
};

/** Each shape: run it, check it, save its histories under their names. */
const SHAPES: Record<string, (r: Recorder) => Promise<void>> = {
  async fires(r) {
    const scope = 'fires';
    const first = await r.start('guardedRun', [scope, 0]);
    const results = [(await first.result()) as JobResult];
    check('the first run dispatched', (await r.count('dispatchJob', scope)) === 1, await r.decisions(scope));
    const second = await r.start('guardedRun', [scope, 0]); // once the first has committed
    results.push((await second.result()) as JobResult);
    const decisions = await r.decisions(scope);
    check(
      'the second run fast-forwarded to the same result',
      nonces(results) === 1 && (await r.count('dispatchJob', scope)) === 1 && decisions.includes('fast-forwarded'),
      decisions,
    );
    r.save('fires', await first.fetchHistory());
    r.save('fast-forwards', await second.fetchHistory());
  },

  parks: (r) => holderAndWaiter(r, 'guardedRun', 'parked', 'in-flight-parked'),

  local: (r) => holderAndWaiter(r, 'localRun', 'local', 'in-flight-waited'),

  async retried(r) {
    const scope = 'retried';
    const run = await r.start('retriedRun', [scope]);
    await run.result();
    const decisions = await r.decisions(scope);
    check(
      'the first dispatch failed and released, the retry dispatched',
      (await r.count('flakyJob', scope)) === 2 && decisions.includes('released-on-failure'),
      decisions,
    );
    r.save('retried', await run.fetchHistory());
  },

  async localRetried(r) {
    const scope = 'local-retried';
    const run = await r.start('localRetriedRun', [scope]);
    await run.result();
    const history = await run.fetchHistory();
    const timers = (history.events ?? []).filter((e) => e.timerStartedEventAttributes).length;
    check('the local retry ran behind a workflow timer', (await r.count('flakyJob', scope)) === 2 && timers === 1, { timers });
    r.save('local-retried', history);
  },

  async continueAsNew(r) {
    const scope = 'continue-as-new';
    const run = await r.start('continueAsNewRun', [scope, 2]);
    const results = (await run.result()) as workflows.Inherited[];
    check('the second run inherited the scope and fast-forwarded', results[1]?.inheritedScope === scope && nonces(results.map((x) => x.result)) === 1, results);
    r.save('continue-as-new-first', await r.client.workflow.getHandle(run.workflowId, run.firstExecutionRunId).fetchHistory());
    r.save('continue-as-new-last', await run.fetchHistory());
  },

  async child(r) {
    const scope = 'child';
    const run = await r.start('parentRun', [scope]);
    const result = (await run.result()) as workflows.Inherited;
    check('the child inherited the scope and dispatched', result.inheritedScope === scope && (await r.count('dispatchJob', scope)) === 1, result);
    r.save('parent', await run.fetchHistory());
    r.save('child', await r.client.workflow.getHandle(`${run.workflowId}-child`).fetchHistory());
  },

  async localBesideRemote(r) {
    // A workflow task timeout of 2 s: core completes the task as a heartbeat while the 3 s local
    // activity runs, and the activity scheduled beside it starts meanwhile.
    const run = await r.start('localBesideRemoteRun', ['beside', 3000], { workflowTaskTimeout: '2s' });
    const order = (await run.result()) as string[];
    const history = await run.fetchHistory();
    const events = history.events ?? [];
    const marker = events.findIndex((e) => e.markerRecordedEventAttributes);
    const tasksBefore = events.slice(0, marker).filter((e) => e.workflowTaskCompletedEventAttributes).length;
    check('the local activity outlived a workflow task (a heartbeat), the activity ran beside it', tasksBefore >= 2 && order.length === 2, {
      tasksBefore,
      order,
    });
    r.save('local-beside-remote', history);
  },
};

async function record(release: ReleaseBuild, redisUrl: string, address: string): Promise<void> {
  const old = (await release.load('index')) as typeof head;
  const run = randomBytes(4).toString('hex');
  const redis = new Redis(redisUrl);
  const connection = await Connection.connect({ address });
  const client = new Client({ connection, identity: `compat-recorder-${release.version}` });
  const nativeConnection = await NativeConnection.connect({ address });
  const dir = historiesDir(release.version, 'ts');
  mkdirSync(dir, { recursive: true });
  const prefix = `compat-record-${run}`;
  const taskQueue = `compat-record-${run}`;
  const logKey = `${prefix}:v3:default:log`;
  const keys = new FireOnceKeys(prefix); // the key layout of 0.8.0 on (docs/upgrading.md)
  // Every worker's plugin, whose dispatch log a read of the log flushes first (it batches since 0.9.0).
  const plugins: head.FireOncePlugin[] = [];
  const plugin = () => {
    const made = new old.FireOncePlugin({ redis, keyPrefix: prefix, pollIntervalMs: 50 });
    plugins.push(made);
    return made;
  };
  const worker = (queue: string, options: Partial<WorkerOptions> = {}) =>
    Worker.create({
      connection: nativeConnection,
      taskQueue: queue,
      identity: `compat-recorder-${release.version}`,
      workflowBundle: bundle,
      activities: compatActivities(old.fireOnce, redis, prefix, release.version),
      plugins: [plugin()],
      ...options,
    });
  const bundle = await bundleCompatWorkflows(release);
  const r: Recorder = {
    version: release.version,
    client,
    redis,
    prefix,
    taskQueue,
    start: (workflow, args, options = {}) =>
      client.workflow.start(workflow, { taskQueue, workflowId: `${workflow}-${randomBytes(4).toString('hex')}`, args, ...options } as never),
    count: async (job, scope) => Number((await redis.get(counterKey(prefix, job, scope))) ?? 0),
    decisions: async (scope) => {
      await Promise.all(plugins.map((p) => p.dispatchLog?.flush()));
      return (await redis.xrange(logKey, '-', '+')).flatMap(([, fields]) => {
        const entry = Object.fromEntries(fields.flatMap((v, i) => (i % 2 === 0 ? [[v, fields[i + 1]]] : [])));
        return entry.scope === scope ? [entry.decision as string] : [];
      });
    },
    save: (name, history) => {
      writeFileSync(join(dir, `${name}.json`), `${JSON.stringify(JSON.parse(historyToJSON(history)), null, 1)}\n`);
      console.log(`  saved ${name}.json`);
    },
    worker,
    subscribers: async (scope) => Number(((await redis.pubsub('NUMSUB', keys.wakeChannel(scope))) as [string, number])[1]),
  };
  try {
    const shapes = release.version === '0.8.0' ? SHAPES : { ...SHAPES, ...HAND_OFF_SHAPES };
    await (
      await worker(taskQueue)
    ).runUntil(async () => {
      for (const [name, shape] of Object.entries(shapes)) {
        console.log(`${name}:`);
        await shape(r);
      }
    });
  } finally {
    for await (const keys of redis.scanStream({ match: `${prefix}:*` }) as AsyncIterable<string[]>) if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
    await connection.close();
    await nativeConnection.close();
  }
}

async function main(): Promise<number> {
  Runtime.install({ logger: new DefaultLogger('ERROR') }); // not the WARN of each failed first dispatch
  const version = process.argv[2];
  const wanted = RECORDED_RELEASES.find((r) => r.version === version);
  if (wanted === undefined)
    throw new Error(`usage: record-histories.ts <version>, one of ${RECORDED_RELEASES.map((r) => r.version).join(', ')} (got ${version})`);
  const release = await buildRelease(wanted);
  console.log(`recording with release ${release.version} (${release.commit}), built in ${release.dir}`);
  return withRedisAndTemporal('record-histories', async (redisService, temporalService) => {
    await record(release, redisService.url, temporalService.address);
    return 0;
  });
}

if (require.main === module) {
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
