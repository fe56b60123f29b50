import type { Redis } from 'ioredis';

/** Resolve after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The integer stored at a counter key; 0 when the key does not exist. */
export async function readCount(redis: Redis, key: string): Promise<number> {
  return Number((await redis.get(key)) ?? 0);
}

/**
 * Poll `check` every 10 ms until it resolves `true`. Throws when `timeoutMs` passes first,
 * saying what was awaited.
 */
export async function waitUntil(what: string, check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`gave up after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
}

/** Poll until the counter at `key` reaches `atLeast`; see {@link waitUntil}. */
export async function waitForCount(redis: Redis, key: string, atLeast: number, timeoutMs = 30_000): Promise<void> {
  await waitUntil(`${key} to reach ${atLeast}`, async () => (await readCount(redis, key)) >= atLeast, timeoutMs);
}

/**
 * Delete every key under `prefix:` with SCAN, so a sample cleans up only what it wrote.
 * Never FLUSHALL: other tests and samples share the same Redis.
 */
export async function deleteKeysUnder(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    if (keys.length > 0) await redis.del(...keys);
    cursor = next;
  } while (cursor !== '0');
}
