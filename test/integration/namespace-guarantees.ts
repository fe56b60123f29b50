import { randomUUID } from 'node:crypto';
import type { WorkflowHandle } from '@temporalio/client';
import type { Cluster, Redis } from 'ioredis';
import { FireOnceKeys } from '../../src/core';
import type { CliRun } from '../cli/run-cli';
import { namespacedCounterKey, type JobResult } from './fixtures/activities';

/** What the namespace scenarios need from a suite; read lazily, since suites connect in beforeAll. */
export interface NamespaceSuite {
  /** The Redis (or Cluster) of the guard and of the jobs' counters. */
  store(): Redis | Cluster;
  readonly prefix: string;
  /** The two Temporal namespaces, each served by two worker processes of the suite. */
  readonly namespaces: readonly [string, string];
  /**
   * Start `namespacedRun(scope, scope, jobMs)` in `namespace`: on the queue of its own workers, or
   * with `shared` on the queue of the workers that set `keyNamespace: 'shared'`.
   */
  start(namespace: string, scope: string, jobMs: number, shared?: boolean): Promise<WorkflowHandle>;
  /** Run the `fire-once` CLI against the suite's store, under its prefix. */
  cli(...args: string[]): Promise<CliRun>;
}

/**
 * Namespaces are isolation boundaries (issue 16), on one Redis (test/integration) and on a Redis
 * Cluster (test/cluster): one Redis, one key prefix, two namespaces, two worker processes each.
 * Dispatches are counted by the job itself, per namespace; the guard never touches the counters.
 */
export function itKeepsNamespacesApart(suite: NamespaceSuite): void {
  const dispatches = async (namespace: string, scope: string) => Number((await suite.store().get(namespacedCounterKey(suite.prefix, namespace, scope))) ?? 0);
  const race = async (namespace: string, scope: string, runs: number, shared = false) =>
    (await Promise.all(
      await Promise.all(Array.from({ length: runs }, () => suite.start(namespace, scope, 800, shared))).then((handles) => handles.map((h) => h.result())),
    )) as JobResult[];

  it('20 racing runs of one scope string in each of two namespaces: one dispatch per namespace, and each gets only its own result', async () => {
    const scope = `session-${randomUUID()}`;
    const [a, b] = suite.namespaces;
    const [inA, inB] = await Promise.all([race(a, scope, 20), race(b, scope, 20)]);
    expect([await dispatches(a, scope), await dispatches(b, scope)]).toEqual([1, 1]);
    expect(new Set(inA.map((r) => r.nonce)).size).toBe(1);
    expect(new Set(inB.map((r) => r.nonce)).size).toBe(1);
    expect(inA.every((r) => r.namespace === a)).toBe(true);
    expect(inB.every((r) => r.namespace === b)).toBe(true);
    expect(inA[0].nonce).not.toBe(inB[0].nonce);
  });

  it('the CLI sees the two apart: report and inspect per namespace, and invalidate never touches the other namespace', async () => {
    const scope = `session-${randomUUID()}`;
    const [a, b] = suite.namespaces;
    await Promise.all([race(a, scope, 3), race(b, scope, 3)]);
    const keysOf = (namespace: string) => new FireOnceKeys(suite.prefix, namespace);
    for (const namespace of [a, b]) {
      const report = await suite.cli('report', '--namespace', namespace, '--json');
      expect(report.code).toBe(0);
      const counts = JSON.parse(report.stdout) as { namespace: string; byScope: { scope: string; counts: Record<string, number> }[] };
      expect(counts.namespace).toBe(namespace);
      expect(counts.byScope.find((s) => s.scope === scope)?.counts.dispatched).toBe(1);
      const inspect = await suite.cli('inspect', scope, '--namespace', namespace, '--json');
      expect(JSON.parse(inspect.stdout)).toMatchObject({ namespace, artifacts: [{ present: true, key: keysOf(namespace).artifact(scope, 'namespacedJob') }] });
    }
    const keptBytes = await suite.store().getBuffer(keysOf(a).artifact(scope, 'namespacedJob'));
    const invalidated = await suite.cli('invalidate', scope, '--job-type', 'namespacedJob', '--namespace', b, '--force');
    expect(invalidated.code).toBe(0);
    expect(await suite.store().exists(keysOf(b).artifact(scope, 'namespacedJob'))).toBe(0);
    expect(await suite.store().getBuffer(keysOf(a).artifact(scope, 'namespacedJob'))).toEqual(keptBytes);
    // The next run in b dispatches again; a still fast-forwards.
    await Promise.all([race(a, scope, 1), race(b, scope, 1)]);
    expect([await dispatches(a, scope), await dispatches(b, scope)]).toEqual([1, 2]);
  });

  it('keyNamespace shares on purpose: workers of both namespaces that set the same keyNamespace dispatch once between them', async () => {
    const scope = `session-${randomUUID()}`;
    const [a, b] = suite.namespaces;
    const [inA, inB] = await Promise.all([race(a, scope, 5, true), race(b, scope, 5, true)]);
    expect((await dispatches(a, scope)) + (await dispatches(b, scope))).toBe(1);
    expect(new Set([...inA, ...inB].map((r) => r.nonce)).size).toBe(1);
  });
}
