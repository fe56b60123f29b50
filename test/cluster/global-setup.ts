import {
  FAST_DEV_SERVER,
  SECOND_NAMESPACE,
  formatClusterNodes,
  startRedisCluster,
  startTemporal,
  type RedisClusterService,
  type TemporalService,
} from '../../sample-workflows/services';

/**
 * Start (or find) a Redis Cluster and a Temporal dev server once for the cluster suite and hand
 * their addresses to every test through REDIS_CLUSTER_NODES and TEMPORAL_ADDRESS. A missing
 * service fails the run with a message saying how to get it; nothing is skipped.
 */
export default async function globalSetup(): Promise<void> {
  const started: { cluster?: RedisClusterService; temporal?: TemporalService } = {};
  (globalThis as { __fireOnceClusterServices?: typeof started }).__fireOnceClusterServices = started;
  started.cluster = await startRedisCluster();
  started.temporal = await startTemporal({ dynamicConfig: FAST_DEV_SERVER, namespaces: [SECOND_NAMESPACE] });
  process.env.REDIS_CLUSTER_NODES = formatClusterNodes(started.cluster.nodes);
  process.env.TEMPORAL_ADDRESS = started.temporal.address;
  const how = started.cluster.spawned ? 'spawned' : 'REDIS_CLUSTER_NODES';
  process.stdout.write(
    `\nservices: redis cluster ${process.env.REDIS_CLUSTER_NODES} (${how}), temporal ${started.temporal.address} (${started.temporal.source})\n`,
  );
}
