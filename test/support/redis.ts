import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { Redis } from 'ioredis';
import { FireOnceGuard, type FireOnceGuardOptions } from '../../src';

/** A client on the suite's Redis (REDIS_URL, set by the global setup). */
export function connectRedis(): Redis {
  const url = process.env.REDIS_URL;
  if (!url) throw new Error('REDIS_URL is not set: run the tests through jest, whose global setup starts redis-server');
  return new Redis(url);
}

/**
 * A port on 127.0.0.1 that refuses connections, for a test of an unreachable Redis. It is below
 * 1024: the kernel never hands out such a port to a listener bound to port 0, which is how every
 * server of the suite finds its port, so no server started meanwhile can answer on it (a free port
 * from `freePort()` could be taken between the pick and the test's connect). Checked, not assumed.
 */
export async function refusedPort(): Promise<number> {
  for (let port = 1; port < 1024; port++) {
    const refused = await new Promise<boolean>((resolve) => {
      const socket = connect({ host: '127.0.0.1', port });
      socket.once('connect', () => {
        socket.destroy();
        resolve(false);
      });
      socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
    });
    if (refused) return port;
  }
  throw new Error('every port below 1024 on 127.0.0.1 accepts connections or fails otherwise than ECONNREFUSED');
}

/** A key prefix of this test's own, so that tests never touch each other's keys. */
export function testPrefix(name: string): string {
  return `t-${name}-${randomBytes(4).toString('hex')}`;
}

/**
 * Delete every key under `prefix:` with SCAN, so that a test cleans up only what it wrote.
 * Never FLUSHALL or KEYS: other tests share the same Redis.
 */
export async function deletePrefix(redis: Redis, prefix: string): Promise<void> {
  for await (const keys of redis.scanStream({ match: `${prefix}:*`, count: 1000 }) as AsyncIterable<string[]>) {
    if (keys.length > 0) await redis.del(...keys);
  }
}

/** The integer stored at a counter key; 0 when the key does not exist. */
export async function readCount(redis: Redis, key: string): Promise<number> {
  return Number((await redis.get(key)) ?? 0);
}

/** What {@link useGuardFixture} gives each test: its own Redis client, prefix and guard. */
export interface GuardFixture {
  redis: Redis;
  prefix: string;
  guard: FireOnceGuard;
}

/**
 * Register the usual hooks: one client for the file, a fresh prefix and guard per test, and
 * deletion of that prefix (only) after each test.
 */
export function useGuardFixture(name: string, options: Partial<FireOnceGuardOptions> = {}): GuardFixture {
  const fx = {} as GuardFixture;
  beforeAll(() => {
    fx.redis = connectRedis();
  });
  beforeEach(() => {
    fx.prefix = testPrefix(name);
    fx.guard = new FireOnceGuard({ redis: fx.redis, keyPrefix: fx.prefix, ...options });
  });
  afterEach(() => deletePrefix(fx.redis, fx.prefix));
  afterAll(() => fx.redis.quit());
  return fx;
}
