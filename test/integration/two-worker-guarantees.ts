import { randomUUID } from 'node:crypto';
import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import type { Cluster, Redis } from 'ioredis';
import { FireOnceKeys } from '../../src/core';
import { counterKey, externalArtifactKey, jobQueueKey, type JobResult } from './fixtures/activities';
import type * as workflows from './fixtures/workflows';

type Workflows = typeof workflows;

/** What the shared scenarios need from a suite; read lazily, since suites connect in beforeAll. */
export interface TwoWorkerSuite {
  /** The Redis (or Cluster) of the guard and of the jobs' counters. */
  store(): Redis | Cluster;
  /** A new connection to that store, for the job runner's blocking pop. */
  connectRunner(): Redis | Cluster;
  readonly prefix: string;
  /** Start a workflow of test/integration/fixtures/workflows.ts on the suite's task queue. */
  start<W extends keyof Workflows>(workflow: W, args: Parameters<Workflows[W]>): Promise<WorkflowHandle>;
  /** Extra checks on the 20 scopes of the "20 scopes x 5 runs" scenario, e.g. their masters. */
  onScopes?(scopes: readonly string[]): Promise<void>;
}

/**
 * The guarantees both two-worker-process suites assert, on one Redis (test/integration) and on a
 * Redis Cluster (test/cluster). Dispatches are counted by INCRs in the activity bodies, on the
 * same store; the guard never touches those counters.
 */
export function itKeepsTheGuaranteesWithTwoWorkers(suite: TwoWorkerSuite): void {
  const dispatches = async (counterId: string) => Number((await suite.store().get(counterKey(suite.prefix, counterId))) ?? 0);

  it('30 concurrent runs of one scope dispatch once, and every run gets that one result', async () => {
    const scope = `session-${randomUUID()}`;
    const handles = await Promise.all(Array.from({ length: 30 }, () => suite.start('guardedRun', [scope, scope, 1_500])));
    const results = (await Promise.all(handles.map((h) => h.result()))) as JobResult[];
    expect(await dispatches(scope)).toBe(1);
    expect(new Set(results.map((r) => r.nonce)).size).toBe(1);
    expect(results[0].counterId).toBe(scope);
  });

  it('a later run fast-forwards to the stored result without dispatching', async () => {
    const scope = `session-${randomUUID()}`;
    const first = (await (await suite.start('guardedRun', [scope, scope, 10])).result()) as JobResult;
    const later = (await (await suite.start('guardedRun', [scope, scope, 10])).result()) as JobResult;
    expect(later).toEqual(first);
    expect(await dispatches(scope)).toBe(1);
  });

  it('failure releases the lock, the next run dispatches exactly once more, later runs fast-forward', async () => {
    const scope = `session-${randomUUID()}`;
    const failed = await (await suite.start('flakyRun', [scope, scope])).result().catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(WorkflowFailedError);
    expect(await suite.store().exists(new FireOnceKeys(suite.prefix).lock(scope, 'flakyJob'))).toBe(0);
    const second = (await (await suite.start('flakyRun', [scope, scope])).result()) as JobResult;
    const third = (await (await suite.start('flakyRun', [scope, scope])).result()) as JobResult;
    expect(third).toEqual(second);
    expect(await dispatches(scope)).toBe(2);
  });

  it('20 scopes x 5 concurrent runs dispatch 20 times, once per scope', async () => {
    const scopes = Array.from({ length: 20 }, () => `session-${randomUUID()}`);
    const handles = await Promise.all(scopes.flatMap((scope) => Array.from({ length: 5 }, () => suite.start('guardedRun', [scope, scope, 500]))));
    await Promise.all(handles.map((h) => h.result()));
    expect(await Promise.all(scopes.map(dispatches))).toEqual(scopes.map(() => 1));
    await suite.onScopes?.(scopes);
  });

  it('external-artifact mode covers the window between "job resolved" and "artifact written"', async () => {
    const store = suite.store();
    const scope = `session-${randomUUID()}`;
    const artifactKey = externalArtifactKey(suite.prefix, scope, 'report');
    const first = await suite.start('externalRun', [scope, scope]);
    // The job runner: take the job, "resolve" it, then write the artifact only 1.5 s later.
    const runner = suite.connectRunner();
    const job = await runner.blpop(jobQueueKey(suite.prefix), 30).finally(() => runner.quit());
    expect(job).not.toBeNull();
    // Inside the window: the dispatch activity has completed, no artifact exists yet.
    expect(await store.exists(artifactKey)).toBe(0);
    const racers = await Promise.all(Array.from({ length: 5 }, () => suite.start('externalRun', [scope, scope])));
    await new Promise((r) => setTimeout(r, 1_500));
    await store.set(artifactKey, `report-for-${scope}`);
    const results = await Promise.all([first, ...racers].map((h) => h.result()));
    expect(results).toEqual(results.map(() => `report-for-${scope}`));
    expect(await dispatches(scope)).toBe(1);
    expect(await store.llen(jobQueueKey(suite.prefix))).toBe(0);
  });

  it('start-to-close shorter than the job, with retries: attempts overlap, 1 dispatch, result delivered', async () => {
    const scope = `session-${randomUUID()}`;
    const result = (await (await suite.start('overlapRun', [scope, scope, 5_000])).result()) as JobResult;
    expect(result.counterId).toBe(scope);
    expect(await dispatches(scope)).toBe(1);
  });
}
