import { ServiceUnavailableError } from './errors';
import { startRedis, type RedisService } from './redis';
import { startTemporal, type StartTemporalOptions, type TemporalService } from './temporal';

/** What {@link withRedisAndTemporal} starts its services with. */
export interface LocalStackOptions {
  /** Fall back to redis-memory-server when there is no other Redis: the demo only. @defaultValue false */
  readonly embeddedRedis?: boolean;
  /** Passed to `startTemporal` when it starts a dev server. */
  readonly temporal?: StartTemporalOptions;
}

/**
 * Start a Redis (`REDIS_URL`, else a spawned redis-server, else with `embeddedRedis` one through
 * redis-memory-server) and a Temporal dev server, say in one line which ones, run `body` on them
 * and stop both, whatever `body` does. A service that cannot be found or started is reported on
 * stderr as `<name>: <how to get it>` and gives exit code 1, not a stack trace.
 *
 * @example
 * ```ts
 * runMain(() => withRedisAndTemporal('demo', async (redis, temporal) => { ...; return 0; }));
 * ```
 */
export async function withRedisAndTemporal(
  name: string,
  body: (redis: RedisService, temporal: TemporalService) => Promise<number>,
  options: LocalStackOptions = {},
): Promise<number> {
  let redis: RedisService | undefined;
  let temporal: TemporalService | undefined;
  try {
    redis = await startRedis({ embeddedFallback: options.embeddedRedis ?? false, progress: (line) => console.log(line) });
    temporal = await startTemporal(options.temporal);
    console.log(`services: redis ${redis.url} (${redis.description}), temporal ${temporal.address} (${temporal.source})`);
    return await body(redis, temporal);
  } catch (err) {
    if (!(err instanceof ServiceUnavailableError)) throw err;
    console.error(`${name}: ${err.message}`);
    return 1;
  } finally {
    await temporal?.stop();
    await redis?.stop();
  }
}
