import { randomUUID } from 'node:crypto';
import { WorkflowFailedError } from '@temporalio/client';
import type { Cluster } from 'ioredis';
import { FireOnceKeys } from '../../src';
import { counterKey, externalArtifactKey, jobQueueKey, type JobResult } from '../integration/fixtures/activities';
import type * as workflows from '../integration/fixtures/workflows';
import { testPrefix } from '../helpers/redis';
import { connectCluster, deletePrefixOnCluster, errorCount } from './helpers/cluster';
import { startClusterWorkers, type ClusterWorkers } from './helpers/workers';

// test/integration's guarantees again, with the guard of both worker processes on an ioredis
// Cluster over a real 3-master Redis Cluster. Dispatches are counted by INCRs in the activity
// bodies, on the cluster too; the guard never touches those counters.
describe('fire-once on a real Temporal server, with the guard on a Redis Cluster', () => {
  const prefix = testPrefix('cint');
  let cluster: Cluster;
  let workers: ClusterWorkers;
  let crossSlotBefore: number;

  beforeAll(async () => {
    cluster = connectCluster();
    crossSlotBefore = await errorCount(cluster, 'CROSSSLOT');
    workers = await startClusterWorkers(prefix);
  }, 180_000);

  afterAll(async () => {
    await workers?.stop();
    await deletePrefixOnCluster(cluster, prefix);
    await cluster.quit();
  });

  const dispatches = async (counterId: string) => Number((await cluster.get(counterKey(prefix, counterId))) ?? 0);
  const start = <W extends keyof typeof workflows>(workflow: W, args: Parameters<(typeof workflows)[W]>) =>
    workers.client.workflow.start(workflow, { taskQueue: workers.taskQueue, workflowId: `${workflow}-${randomUUID()}`, args } as never);

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
    expect(await cluster.exists(new FireOnceKeys(prefix).lock(scope, 'flakyJob'))).toBe(0);
    const second = (await (await start('flakyRun', [scope, scope])).result()) as JobResult;
    const third = (await (await start('flakyRun', [scope, scope])).result()) as JobResult;
    expect(third).toEqual(second);
    expect(await dispatches(scope)).toBe(2);
  });

  it('20 scopes x 5 concurrent runs dispatch 20 times, once per scope, with the scopes spread over the masters', async () => {
    const scopes = Array.from({ length: 20 }, () => `session-${randomUUID()}`);
    const handles = await Promise.all(scopes.flatMap((scope) => Array.from({ length: 5 }, () => start('guardedRun', [scope, scope, 500]))));
    await Promise.all(handles.map((h) => h.result()));
    const counts = await Promise.all(scopes.map(dispatches));
    expect(counts).toEqual(scopes.map(() => 1));
    const keys = new FireOnceKeys(prefix);
    const masters = await Promise.all(
      scopes.map(async (scope) => {
        const slot = Number(await cluster.cluster('KEYSLOT', keys.lock(scope, 'slowJob')));
        const owner = (await cluster.cluster('SLOTS')).find(([from, to]) => slot >= from && slot <= to);
        return owner?.[2][1];
      }),
    );
    expect(new Set(masters).size).toBeGreaterThanOrEqual(2); // 20 random scopes on 3 masters: on one only with odds 3^-19
  });

  it('external-artifact mode covers the window between "job resolved" and "artifact written"', async () => {
    const scope = `session-${randomUUID()}`;
    const artifactKey = externalArtifactKey(prefix, scope, 'report');
    const first = await start('externalRun', [scope, scope]);
    // The job runner: take the job, "resolve" it, then write the artifact only 1.5 s later.
    const runner = cluster.duplicate();
    const job = await runner.blpop(jobQueueKey(prefix), 30).finally(() => runner.quit());
    expect(job).not.toBeNull();
    // Inside the window: the dispatch activity has completed, no artifact exists yet.
    expect(await cluster.exists(artifactKey)).toBe(0);
    const racers = await Promise.all(Array.from({ length: 5 }, () => start('externalRun', [scope, scope])));
    await new Promise((r) => setTimeout(r, 1_500));
    await cluster.set(artifactKey, `report-for-${scope}`);
    const results = await Promise.all([first, ...racers].map((h) => h.result()));
    expect(results).toEqual(results.map(() => `report-for-${scope}`));
    expect(await dispatches(scope)).toBe(1);
    expect(await cluster.llen(jobQueueKey(prefix))).toBe(0);
  });

  it('start-to-close shorter than the job, with retries: attempts overlap, 1 dispatch, result delivered', async () => {
    const scope = `session-${randomUUID()}`;
    const result = (await (await start('overlapRun', [scope, scope, 5_000])).result()) as JobResult;
    expect(result.counterId).toBe(scope);
    expect(await dispatches(scope)).toBe(1);
  });

  it('no master replied CROSSSLOT to anything while these workflows ran', async () => {
    expect(await errorCount(cluster, 'CROSSSLOT')).toBe(crossSlotBefore);
  });
});
