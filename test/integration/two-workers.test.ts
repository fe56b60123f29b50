import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { bundleWorkflowCode } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import { FireOncePlugin } from '../../src';
import { counterKey, type JobResult } from './fixtures/activities';
import type * as workflows from './fixtures/workflows';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';
import { spawnWorker, type WorkerProcess } from '../support/workers';
import { itKeepsTheGuaranteesWithTwoWorkers } from './two-worker-guarantees';

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

  itKeepsTheGuaranteesWithTwoWorkers({ store: () => redis, connectRunner: () => redis.duplicate(), prefix, start });

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
});
