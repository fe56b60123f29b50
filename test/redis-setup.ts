import { startRedis } from '../sample-workflows/services';
import { services } from './global-teardown';

/**
 * The global setup of the suites that need Redis alone: start (or find) redis-server once and
 * hand its address to every test through REDIS_URL. The Temporal suites' setup then finds it
 * there and starts only the dev server.
 */
export default async function redisSetup(): Promise<void> {
  const redis = await startRedis();
  services().push(redis);
  process.env.REDIS_URL = redis.url;
  process.stdout.write(`\nservices: redis ${redis.url} (${redis.description})\n`);
}
