import { randomUUID } from 'node:crypto';
import type { Cluster } from 'ioredis';
import { SECOND_NAMESPACE } from '../../sample-workflows/services';
import { runCli } from '../cli/run-cli';
import { testPrefix } from '../support/redis';
import { itKeepsNamespacesApart } from '../integration/namespace-guarantees';
import { connectCluster, deletePrefixOnCluster, masters } from '../support/cluster/cluster';
import { startClusterWorkers, type ClusterWorkers } from '../support/cluster/workers';

// test/integration/namespaces.test.ts's scenarios again, with the guard on a 3-master Redis Cluster:
// two worker processes per namespace, and one per namespace with keyNamespace 'shared'.
describe('namespaces are isolation boundaries, on a Redis Cluster', () => {
  const prefix = testPrefix('cns');
  const namespaces = ['default', SECOND_NAMESPACE] as const;
  const taskQueue = `fire-once-cns-${randomUUID()}`;
  let cluster: Cluster;
  let url: string;
  const pools = new Map<string, ClusterWorkers>();

  beforeAll(async () => {
    cluster = connectCluster();
    const [first] = await masters(cluster);
    url = `redis://${first.options.host}:${first.options.port}`;
    for (const namespace of namespaces) {
      pools.set(namespace, await startClusterWorkers(prefix, { namespace, taskQueue, bothPrebuilt: true }));
      pools.set(
        `${namespace}/shared`,
        await startClusterWorkers(prefix, { namespace, taskQueue: `${taskQueue}-shared`, keyNamespace: 'shared', bothPrebuilt: true }),
      );
    }
  }, 300_000);

  afterAll(async () => {
    await Promise.all([...pools.values()].map((p) => p.stop()));
    await deletePrefixOnCluster(cluster, prefix);
    await cluster.quit();
  });

  itKeepsNamespacesApart({
    store: () => cluster,
    prefix,
    namespaces,
    start: (namespace, scope, jobMs, shared) => {
      const pool = pools.get(shared ? `${namespace}/shared` : namespace)!;
      return pool.client.workflow.start('namespacedRun', {
        taskQueue: pool.taskQueue,
        workflowId: `namespacedRun-${randomUUID()}`,
        args: [scope, scope, jobMs],
      });
    },
    cli: (...args) => runCli([...args, '--redis', url, '--prefix', prefix]),
  });
});
