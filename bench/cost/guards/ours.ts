import type { Redis } from 'ioredis';
import { FireOnceGuard } from '../library';
import { ARTIFACT_TTL_MS, LOCK_TTL_MS, type BenchStep, type Decision, type GuardUnderTest } from './types';

/**
 * temporal-fire-once's core guard, used as its README shows: `acquire` (artifact check and lock in
 * one script), then `commit` on success or `release` (compare-and-delete) on failure.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * import { createOurs } from './ours';
 * const guard = createOurs(new Redis({ lazyConnect: true }), 'bench');
 * void guard.dispatch({ scope: 's1', step: 'dispatch' }, async () => 'result');
 * ```
 */
export function createOurs(redis: Redis, prefix: string): GuardUnderTest {
  const guard = new FireOnceGuard({ redis, keyPrefix: prefix, lockTtlMs: LOCK_TTL_MS, artifactTtlMs: ARTIFACT_TTL_MS });
  return {
    name: 'ours',
    settings: `FireOnceGuard from the compiled package (dist/), defaults (lockTtlMs ${LOCK_TTL_MS}, artifactTtlMs ${ARTIFACT_TTL_MS}, storeTimeoutMs 5000)`,
    keyPatterns: [`${prefix}:*`],
    async dispatch(step: BenchStep, run: () => Promise<string>): Promise<Decision> {
      const outcome = await guard.acquire({ scope: step.scope, step: step.step, jobType: step.step });
      if (outcome.kind === 'fast-forward') return { kind: 'fast-forward', value: outcome.artifact.toString('utf8') };
      if (outcome.kind === 'held') return { kind: 'held' };
      let value: string;
      try {
        value = await run();
      } catch (err) {
        await guard.release(outcome.lease);
        throw err;
      }
      await guard.commit(outcome.lease, Buffer.from(value, 'utf8'));
      return { kind: 'ran', value };
    },
  };
}
