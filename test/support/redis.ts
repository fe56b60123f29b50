import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { FireOnceGuard, type FireOnceGuardOptions } from '../../src';
import { deleteKeysUnder } from '../../sample-workflows/shared/redis';

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

/** Delete every key under `prefix:` (SCAN, never FLUSHALL or KEYS); the samples' own clean-up. */
export const deletePrefix = deleteKeysUnder;

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
