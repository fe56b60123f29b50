import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';

/** A client on the suite's Redis (REDIS_URL, set by the global setup). */
export function connectRedis(): Redis {
  const url = process.env.REDIS_URL;
  if (!url) throw new Error('REDIS_URL is not set: run the tests through jest, whose global setup starts redis-server');
  return new Redis(url);
}

/** A key prefix of this test's own, so that tests never touch each other's keys. */
export function testPrefix(name: string): string {
  return `t-${name}-${randomBytes(4).toString('hex')}`;
}

/** Delete every key under `prefix:` (SCAN, never FLUSHALL or KEYS). */
export async function deletePrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    if (keys.length > 0) await redis.del(...keys);
    cursor = next;
  } while (cursor !== '0');
}
