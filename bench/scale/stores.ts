/**
 * The two stores the scale bench compares: one redis-server, and a 3-master Redis Cluster. Each
 * gives a client for the bench process and the env a worker process needs to build its own.
 */
import { Cluster, Redis } from 'ioredis';
import { formatClusterNodes, startRedis, startRedisCluster, type RedisClusterService, type RedisService } from '../../sample-workflows/services';

export const STORES = ['single', 'cluster'] as const;
export type StoreName = (typeof STORES)[number];

/** A started (or found) store. */
export interface Store {
  readonly name: StoreName;
  /** How it was found: spawned here, or REDIS_URL / REDIS_CLUSTER_NODES. */
  readonly source: string;
  /** A new client on the store; the caller closes it. */
  connect(): Redis | Cluster;
  /** What a worker process needs to connect: REDIS_URL or REDIS_CLUSTER_NODES. */
  readonly env: Record<string, string>;
  stop(): Promise<void>;
}

/** Start (or find) one store. */
export async function startStore(name: StoreName): Promise<Store> {
  if (name === 'single') {
    const service: RedisService = await startRedis();
    return {
      name,
      source: service.spawned ? 'spawned redis-server' : 'REDIS_URL',
      connect: () => new Redis(service.url),
      env: { STORE: 'single', REDIS_URL: service.url },
      stop: () => service.stop(),
    };
  }
  const cluster: RedisClusterService = await startRedisCluster();
  const nodes = formatClusterNodes(cluster.nodes);
  return {
    name,
    source: cluster.spawned ? `spawned ${cluster.nodes.length}-master cluster` : 'REDIS_CLUSTER_NODES',
    connect: () => new Cluster([...cluster.nodes]),
    env: { STORE: 'cluster', REDIS_CLUSTER_NODES: nodes },
    stop: () => cluster.stop(),
  };
}

/** Build the client a worker process was told about (see {@link Store.env}). */
export function connectFromEnv(env: NodeJS.ProcessEnv): Redis | Cluster {
  if (env.STORE === 'cluster') {
    const nodes = (env.REDIS_CLUSTER_NODES ?? '').split(',').map((entry) => {
      const [host, port] = entry.split(':');
      return { host, port: Number(port) };
    });
    return new Cluster(nodes);
  }
  if (!env.REDIS_URL) throw new Error('REDIS_URL is not set');
  return new Redis(env.REDIS_URL);
}

/** Each master of the store (the server itself for a single Redis), for SCAN-based clean-up. */
export async function mastersOf(client: Redis | Cluster): Promise<Redis[]> {
  if (client instanceof Cluster) {
    if (client.status !== 'ready') await client.ping();
    return client.nodes('master');
  }
  return [client];
}

/** Delete every key under `prefix:`: SCAN each master, then DEL key by key (keys span slots). */
export async function deletePrefix(client: Redis | Cluster, prefix: string): Promise<void> {
  for (const node of await mastersOf(client)) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 5000);
      await Promise.all(keys.map((key) => client.del(key)));
      cursor = next;
    } while (cursor !== '0');
  }
}
