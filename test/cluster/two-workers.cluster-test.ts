import { randomUUID } from 'node:crypto';
import type { Cluster } from 'ioredis';
import { FireOnceKeys } from '../../src/core';
import type * as workflows from '../integration/fixtures/workflows';
import { testPrefix } from '../support/redis';
import { itKeepsTheGuaranteesWithTwoWorkers } from '../integration/two-worker-guarantees';
import { connectCluster, deletePrefixOnCluster, errorCount } from '../support/cluster/cluster';
import { startClusterWorkers, type ClusterWorkers } from '../support/cluster/workers';

// test/integration's guarantees again (the same scenarios, from two-worker-guarantees.ts), with
// the guard of both worker processes on an ioredis Cluster over a real 3-master Redis Cluster.
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

  const start = <W extends keyof typeof workflows>(workflow: W, args: Parameters<(typeof workflows)[W]>) =>
    workers.client.workflow.start(workflow, { taskQueue: workers.taskQueue, workflowId: `${workflow}-${randomUUID()}`, args } as never);

  itKeepsTheGuaranteesWithTwoWorkers({
    store: () => cluster,
    connectRunner: () => cluster.duplicate(),
    prefix,
    start,
    // ...with the 20 scopes of "20 scopes x 5 runs" spread over the masters.
    async onScopes(scopes) {
      const keys = new FireOnceKeys(prefix);
      const slots = await cluster.cluster('SLOTS');
      const masters = await Promise.all(
        scopes.map(async (scope) => {
          const slot = Number(await cluster.cluster('KEYSLOT', keys.lock(scope, 'slowJob')));
          return slots.find(([from, to]) => slot >= from && slot <= to)?.[2][1];
        }),
      );
      expect(new Set(masters).size).toBeGreaterThanOrEqual(2); // 20 random scopes on 3 masters: on one only with odds 3^-19
    },
  });

  it('no master replied CROSSSLOT to anything while these workflows ran', async () => {
    expect(await errorCount(cluster, 'CROSSSLOT')).toBe(crossSlotBefore);
  });
});
