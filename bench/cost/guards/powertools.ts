import { IdempotencyAlreadyInProgressError, IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { CachePersistenceLayer } from '@aws-lambda-powertools/idempotency/cache';
import type { CacheClient } from '@aws-lambda-powertools/idempotency/cache/types';
import type { Redis } from 'ioredis';
import { ARTIFACT_TTL_MS, LOCK_TTL_MS, type BenchStep, type Decision, type GuardUnderTest } from './types';

/**
 * ioredis behind Powertools' `CacheClient` interface (`get`, `set(name, value, { EX, NX })`,
 * `del(keys)`), which is shaped after `@redis/client`. Each method is one command.
 */
function cacheClientOf(redis: Redis): CacheClient {
  return {
    get: (name) => redis.get(name),
    set: (name, value, options) => {
      const { EX, NX } = (options ?? {}) as { EX?: number; NX?: boolean };
      const key = typeof name === 'string' ? name : Buffer.from(name);
      const text = String(value);
      if (EX === undefined) return NX ? redis.set(key, text, 'NX') : redis.set(key, text);
      return NX ? redis.set(key, text, 'EX', EX, 'NX') : redis.set(key, text, 'EX', EX);
    },
    del: (keys) => redis.del(...keys),
  };
}

/**
 * Outside Lambda there is no invocation deadline: this stands in for the Lambda context so that
 * Powertools records an in-progress expiry (our lock TTL). Without one it warns on every call and
 * treats every in-progress record as an orphan that a second caller may take over.
 */
const deadlineStandIn = { getRemainingTimeInMillis: () => LOCK_TTL_MS };

/**
 * `@aws-lambda-powertools/idempotency` `makeIdempotent` on its cache persistence layer (the
 * package's `/cache` entry, `CachePersistenceLayer`; there is no `/redis` entry) over ioredis.
 * The idempotency key is the hash of `{ scope, step }`; defaults otherwise (md5, no local cache,
 * no payload validation), with `expiresAfterSeconds` set to our artifact TTL.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * import { createPowertools } from './powertools';
 * const guard = createPowertools(new Redis({ lazyConnect: true }), 'bench');
 * void guard.dispatch({ scope: 's1', step: 'dispatch' }, async () => 'result');
 * ```
 */
export function createPowertools(redis: Redis, prefix: string): GuardUnderTest {
  const config = new IdempotencyConfig({ expiresAfterSeconds: ARTIFACT_TTL_MS / 1000 });
  config.registerLambdaContext(deadlineStandIn as unknown as Parameters<IdempotencyConfig['registerLambdaContext']>[0]);
  const persistenceStore = new CachePersistenceLayer({ client: cacheClientOf(redis) });
  const idempotent = makeIdempotent(async (_step: BenchStep, run: () => Promise<string>) => run(), {
    persistenceStore,
    config,
    keyPrefix: prefix,
  });
  return {
    name: 'powertools',
    settings:
      `@aws-lambda-powertools/idempotency makeIdempotent + CachePersistenceLayer (ioredis adapter); defaults ` +
      `(md5, useLocalCache false) but expiresAfterSeconds ${ARTIFACT_TTL_MS / 1000}; in-progress expiry ${LOCK_TTL_MS} ms via registerLambdaContext`,
    keyPatterns: [`${prefix}#*`],
    async dispatch(step: BenchStep, run: () => Promise<string>): Promise<Decision> {
      let ran = false;
      try {
        const value = await idempotent({ scope: step.scope, step: step.step }, () => {
          ran = true;
          return run();
        });
        return ran ? { kind: 'ran', value } : { kind: 'fast-forward', value };
      } catch (err) {
        if (err instanceof IdempotencyAlreadyInProgressError) return { kind: 'held' };
        throw err;
      }
    },
  };
}
