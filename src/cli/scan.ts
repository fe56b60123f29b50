import type { Redis } from 'ioredis';
import { isCluster, type RedisClient } from '../core/scripts';

/**
 * Every key matching `pattern` (SCAN ... MATCH, 1,000 at a time). On a Redis Cluster every
 * master is scanned: SCAN is per node, and ioredis would send it to any one of them.
 */
export async function scanKeys(redis: RedisClient, pattern: string): Promise<string[]> {
  const nodes: Redis[] = isCluster(redis) ? redis.nodes('master') : [redis];
  const found = new Set<string>();
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      for (const key of keys) found.add(key);
      cursor = next;
    } while (cursor !== '0');
  }
  return [...found];
}
