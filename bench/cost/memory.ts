import type { Redis } from 'ioredis';

/**
 * Every key matching a SCAN pattern. SCAN, never KEYS, and only the bench's own patterns.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * import { scanKeys } from './memory';
 * void scanKeys(new Redis({ lazyConnect: true }), 'bench:*');
 * ```
 */
export async function scanKeys(redis: Redis, pattern: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [nextCursor, batch] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    keys.push(...batch);
    cursor = nextCursor;
  } while (cursor !== '0');
  return keys;
}

/**
 * UNLINK every key matching any of `patterns`; resolves how many there were. Only the bench's
 * own prefixes are ever passed here: no FLUSHALL, even on a Redis the bench started itself.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * import { unlinkMatching } from './memory';
 * void unlinkMatching(new Redis({ lazyConnect: true }), ['bench:*']);
 * ```
 */
export async function unlinkMatching(redis: Redis, patterns: readonly string[]): Promise<number> {
  let removed = 0;
  for (const pattern of patterns) {
    const keys = await scanKeys(redis, pattern);
    for (let i = 0; i < keys.length; i += 500) removed += await redis.unlink(...keys.slice(i, i + 500));
  }
  return removed;
}

/** Redis memory that one committed step takes, in bytes, as `MEMORY USAGE` reports it. */
export interface StepMemory {
  /** Every key of the step: what it holds while its lock is still alive. */
  readonly bytesPerStepWithLock: number;
  /** Only the keys that outlive the lock (TTL longer than the lock's, or none): what stays after. */
  readonly bytesPerStepAfterLock: number;
  /** `bytesPerStepWithLock` minus the payload's own bytes. */
  readonly overheadWithLock: number;
  /** `bytesPerStepAfterLock` minus the payload's own bytes. */
  readonly overheadAfterLock: number;
  /** Keys per step while the lock lives, and after. */
  readonly keysPerStepWithLock: number;
  readonly keysPerStepAfterLock: number;
}

/**
 * Sum `MEMORY USAGE key SAMPLES 0` over every key matching `patterns`, left by `steps` committed
 * steps with a payload of `payloadBytes`, and divide by `steps`. A key whose TTL is at most
 * `lockTtlMs` goes when the lock does; every other key stays as long as the artifact.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * import { memoryPerStep } from './memory';
 * void memoryPerStep(new Redis({ lazyConnect: true }), ['bench:*'], 100, 256, 900_000);
 * ```
 */
export async function memoryPerStep(redis: Redis, patterns: readonly string[], steps: number, payloadBytes: number, lockTtlMs: number): Promise<StepMemory> {
  let all = 0;
  let kept = 0;
  let allKeys = 0;
  let keptKeys = 0;
  for (const pattern of patterns) {
    const found = await scanKeys(redis, pattern);
    for (let i = 0; i < found.length; i += 500) {
      const pipeline = redis.pipeline();
      for (const key of found.slice(i, i + 500)) pipeline.memory('USAGE', key, 'SAMPLES', 0).pttl(key);
      const replies = (await pipeline.exec()) ?? [];
      for (let j = 0; j < replies.length; j += 2) {
        const [usageErr, usage] = replies[j];
        const [ttlErr, pttl] = replies[j + 1];
        if (usageErr || ttlErr) throw usageErr ?? ttlErr;
        const bytes = Number(usage);
        all += bytes;
        allKeys += 1;
        if (Number(pttl) === -1 || Number(pttl) > lockTtlMs) {
          kept += bytes;
          keptKeys += 1;
        }
      }
    }
  }
  return {
    bytesPerStepWithLock: all / steps,
    bytesPerStepAfterLock: kept / steps,
    overheadWithLock: all / steps - payloadBytes,
    overheadAfterLock: kept / steps - payloadBytes,
    keysPerStepWithLock: allKeys / steps,
    keysPerStepAfterLock: keptKeys / steps,
  };
}
