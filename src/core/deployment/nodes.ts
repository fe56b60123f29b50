import type { Redis } from 'ioredis';
import { isCluster, type RedisClient } from '../scripts';

/** One data node the guard writes to: a standalone or Sentinel-managed primary, or a Cluster master. */
export interface Primary {
  /** `host:port`, or what the client was given when it has no fixed address (Sentinel, a socket). */
  readonly address: string;
  /** A connection to that node alone. */
  readonly client: Redis;
}

/** How a single connection names its node in messages. */
export function addressOf(client: Redis): string {
  const { host, port, path, sentinels, name } = client.options;
  if (sentinels && sentinels.length > 0) return `the master "${name}" of Sentinel`;
  if (path) return path;
  return `${host ?? '127.0.0.1'}:${port ?? 6379}`;
}

/**
 * Every node whose settings decide what happens to the guard's keys: the one node of a `Redis`
 * client, or every master of a `Cluster` (a Cluster client first waits for its slot map, which
 * any command loads: `INFO server`, which the least-privilege worker user may run, not `PING`).
 */
export async function primariesOf(redis: RedisClient): Promise<Primary[]> {
  if (!isCluster(redis)) return [{ address: addressOf(redis), client: redis }];
  if (redis.status !== 'ready') await redis.info('server');
  return redis.nodes('master').map((client) => ({ address: addressOf(client), client }));
}
