import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { bundleWorkflowCode } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import { FireOncePlugin } from '../../src';
import { counterKey, externalArtifactKey, jobQueueKey, type JobResult } from './fixtures/activities';
import type * as workflows from './fixtures/workflows';
import { connectRedis, deletePrefix, testPrefix } from '../helpers/redis';
import { spawnWorker, type WorkerProcess } from '../helpers/workers';

// The guarantees on a real Temporal dev server and a real Redis, with two worker processes on one
// task queue: one bundles workflowsPath itself, the other loads a bundle prebuilt through the
// plugin's configureBundler. Dispatches are counted by INCRs in the activity bodies.
describe('fire-once on a real Temporal server with two worker processes', () => {
  const prefix = testPrefix('int');
  const taskQueue = `fire-once-int-${randomUUID()}`;
  let redis: Redis;
  let connection: Connection;
  let client: Client;
  let workers: WorkerProcess[] = [];
  let bundleDir: string;

  beforeAll(async () => {
    redis = connectRedis();
    bundleDir = mkdtempSync(join(tmpdir(), 'fire-once-bundle-'));
    const { code } = await bundleWorkflowCode({
      workflowsPath: require.resolve('./fixtures/workflows'),
      plugins: [new FireOncePlugin({ redis })],
      logger: { log: () => undefined, trace: () => undefined, debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined },
    });
    const bundlePath = join(bundleDir, 'workflows-bundle.js');
    writeFileSync(bundlePath, code);
    const env = {
      TEMPORAL_ADDRESS: process.env.TEMPORAL_ADDRESS as string,
      REDIS_URL: process.env.REDIS_URL as string,
      TASK_QUEUE: taskQueue,
      KEY_PREFIX: prefix,
    };
    const script = 'test/integration/fixtures/worker-process.ts';
    workers = await Promise.all([spawnWorker(script, env), spawnWorker(script, { ...env, WORKFLOW_BUNDLE: bundlePath })]);
    connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS as string });
    client = new Client({ connection });
  }, 180_000);

  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await connection?.close();
    await deletePrefix(redis, prefix);
    await redis.quit();
    rmSync(bundleDir, { recursive: true, force: true });
  });

  const dispatches = async (counterId: string) => Number((await redis.get(counterKey(prefix, counterId))) ?? 0);
  const start = <W extends keyof typeof workflows>(workflow: W, args: Parameters<(typeof workflows)[W]>) =>
    client.workflow.start(workflow, { taskQueue, workflowId: `${workflow}-${randomUUID()}`, args } as never);

  it('30 concurrent runs of one scope dispatch once, and every run gets that one result', async () => {
    const scope = `session-${randomUUID()}`;
    const handles = await Promise.all(Array.from({ length: 30 }, () => start('guardedRun', [scope, scope, 1_500])));
    const results = (await Promise.all(handles.map((h) => h.result()))) as JobResult[];
    expect(await dispatches(scope)).toBe(1);
    expect(new Set(results.map((r) => r.nonce)).size).toBe(1);
    expect(results[0].counterId).toBe(scope);
  });

  it('a later run fast-forwards to the stored result without dispatching', async () => {
    const scope = `session-${randomUUID()}`;
    const first = (await (await start('guardedRun', [scope, scope, 10])).result()) as JobResult;
    const later = (await (await start('guardedRun', [scope, scope, 10])).result()) as JobResult;
    expect(later).toEqual(first);
    expect(await dispatches(scope)).toBe(1);
  });

  it('failure releases the lock, the next run dispatches exactly once more, later runs fast-forward', async () => {
    const scope = `session-${randomUUID()}`;
    const failed = await (await start('flakyRun', [scope, scope])).result().catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(WorkflowFailedError);
    expect(await redis.exists(new FireOncePlugin({ redis, keyPrefix: prefix }).guard.keys.lock(scope, 'flakyJob'))).toBe(0);
    const second = (await (await start('flakyRun', [scope, scope])).result()) as JobResult;
    const third = (await (await start('flakyRun', [scope, scope])).result()) as JobResult;
    expect(third).toEqual(second);
    expect(await dispatches(scope)).toBe(2);
  });

  it('20 scopes x 5 concurrent runs dispatch 20 times, once per scope', async () => {
    const scopes = Array.from({ length: 20 }, () => `session-${randomUUID()}`);
    const handles = await Promise.all(scopes.flatMap((scope) => Array.from({ length: 5 }, () => start('guardedRun', [scope, scope, 500]))));
    await Promise.all(handles.map((h) => h.result()));
    const counts = await Promise.all(scopes.map(dispatches));
    expect(counts).toEqual(scopes.map(() => 1));
  });

  it('an unmarked activity runs every time', async () => {
    const scope = `session-${randomUUID()}`;
    for (let i = 0; i < 3; i++) await (await start('plainRun', [scope, scope])).result();
    expect(await dispatches(scope)).toBe(3);
  });

  it('a run with no scope fails with non-retryable FireOnceMissingScope and dispatches nothing', async () => {
    const counterId = `noscope-${randomUUID()}`;
    const err = await (await start('noScopeRun', [counterId])).result().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkflowFailedError);
    const failure = (err as WorkflowFailedError).cause?.cause;
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect((failure as ApplicationFailure).type).toBe('FireOnceMissingScope');
    expect((failure as ApplicationFailure).nonRetryable).toBe(true);
    expect(await dispatches(counterId)).toBe(0);
  });

  it('external-artifact mode covers the window between "job resolved" and "artifact written"', async () => {
    const scope = `session-${randomUUID()}`;
    const artifactKey = externalArtifactKey(prefix, scope, 'report');
    const first = await start('externalRun', [scope, scope]);
    // The job runner: take the job, "resolve" it, then write the artifact only 1.5 s later.
    const runner = redis.duplicate();
    const job = await runner.blpop(jobQueueKey(prefix), 30).finally(() => runner.quit());
    expect(job).not.toBeNull();
    // Inside the window: the dispatch activity has completed, no artifact exists yet.
    expect(await redis.exists(artifactKey)).toBe(0);
    const racers = await Promise.all(Array.from({ length: 5 }, () => start('externalRun', [scope, scope])));
    await new Promise((r) => setTimeout(r, 1_500));
    await redis.set(artifactKey, `report-for-${scope}`);
    const results = await Promise.all([first, ...racers].map((h) => h.result()));
    expect(results).toEqual(results.map(() => `report-for-${scope}`));
    expect(await dispatches(scope)).toBe(1);
    expect(await redis.llen(jobQueueKey(prefix))).toBe(0);
  });

  it('a job that outlives its lease five times over is never dispatched again while it is alive', async () => {
    const scope = `session-${randomUUID()}`;
    const first = await start('longRun', [scope, scope, 5_000]);
    const later: Awaited<ReturnType<typeof start>>[] = [];
    for (let i = 0; i < 4; i++) {
      await new Promise((r) => setTimeout(r, 1_000)); // one lease later each time
      later.push(await start('longRun', [scope, scope, 5_000]));
    }
    const results = (await Promise.all([first, ...later].map((h) => h.result()))) as JobResult[];
    expect(new Set(results.map((r) => r.nonce)).size).toBe(1);
    expect(await dispatches(scope)).toBe(1);
  });

  it('start-to-close shorter than the job, with retries: attempts overlap, 1 dispatch, result delivered', async () => {
    const scope = `session-${randomUUID()}`;
    const result = (await (await start('overlapRun', [scope, scope, 5_000])).result()) as JobResult;
    expect(result.counterId).toBe(scope);
    expect(await dispatches(scope)).toBe(1);
  });
});
