// Records the histories of test/fixtures/histories-<version>/ts with a worker of an earlier
// release, built from git history: `npx tsx test/compat/record-histories.ts` (0.8.0). Starts its
// own Redis and Temporal dev server (or uses REDIS_URL and TEMPORAL_ADDRESS), runs each shape of
// test/compat/fixtures/workflows.ts once, checks that it did what the shape is for (one
// dispatch, a parked waiter, a local retry behind a timer...), and writes the histories.
// test/compat/replay.test.ts replays them with HEAD's plugin.
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client, Connection, type WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { Redis } from 'ioredis';
import { withRedisAndTemporal } from '../../sample-workflows/services';
import type * as head from '../../src';
import { RELEASE_0_8_0, buildRelease, type ReleaseBuild } from '../support/release-build';
import { waitFor } from '../support/wait';
import { bundleCompatWorkflows } from './bundle';
import { historiesDir, type History } from './histories';
import { compatActivities, counterKey, type JobName, type JobResult } from './fixtures/activities';
import type * as workflows from './fixtures/workflows';

type Workflows = typeof workflows;

interface Recorder {
  readonly client: Client;
  readonly redis: Redis;
  readonly prefix: string;
  readonly taskQueue: string;
  start<W extends keyof Workflows>(
    workflow: W,
    args: Parameters<Workflows[W]>,
    options?: { workflowTaskTimeout?: string },
  ): Promise<WorkflowHandleWithFirstExecutionRunId>;
  count(job: JobName, scope: string): Promise<number>;
  decisions(scope: string): Promise<string[]>;
  save(name: string, history: History): void;
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
  const r: Recorder = {
    client,
    redis,
    prefix,
    taskQueue,
    start: (workflow, args, options = {}) =>
      client.workflow.start(workflow, { taskQueue, workflowId: `${workflow}-${randomBytes(4).toString('hex')}`, args, ...options } as never),
    count: async (job, scope) => Number((await redis.get(counterKey(prefix, job, scope))) ?? 0),
    decisions: async (scope) =>
      (await redis.xrange(logKey, '-', '+')).flatMap(([, fields]) => {
        const entry = Object.fromEntries(fields.flatMap((v, i) => (i % 2 === 0 ? [[v, fields[i + 1]]] : [])));
        return entry.scope === scope ? [entry.decision as string] : [];
      }),
    save: (name, history) => {
      writeFileSync(join(dir, `${name}.json`), `${JSON.stringify(JSON.parse(historyToJSON(history)), null, 1)}\n`);
      console.log(`  saved ${name}.json`);
    },
  };
  try {
    const worker = await Worker.create({
      connection: nativeConnection,
      taskQueue,
      identity: `compat-recorder-${release.version}`,
      workflowBundle: await bundleCompatWorkflows(release),
      activities: compatActivities(old.fireOnce, redis, prefix, release.version),
      plugins: [new old.FireOncePlugin({ redis, keyPrefix: prefix, pollIntervalMs: 50 })],
    });
    await worker.runUntil(async () => {
      for (const [name, shape] of Object.entries(SHAPES)) {
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
  const release = await buildRelease(RELEASE_0_8_0);
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
