import { ServiceUnavailableError } from './errors';
import { startRedis, type RedisService } from './redis';
import { startTemporal, type TemporalService } from './temporal';

/**
 * Start a Redis (`REDIS_URL`, else a spawned redis-server) and a Temporal dev server, run `body`
 * on them and stop both, whatever `body` does. A service that cannot be found or started is
 * reported on stderr as `<name>: <how to get it>` and gives exit code 1, not a stack trace.
 *
 * @example
 * ```ts
 * runMain(() => withRedisAndTemporal('demo', async (redis, temporal) => { ...; return 0; }));
 * ```
 */
export async function withRedisAndTemporal(
  name: string,
  body: (redis: RedisService, temporal: TemporalService) => Promise<number>,
): Promise<number> {
  let redis: RedisService | undefined;
  let temporal: TemporalService | undefined;
  try {
    redis = await startRedis();
    temporal = await startTemporal();
    console.log(`services: redis ${redis.url}, temporal ${temporal.address} (${temporal.source})`);
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
