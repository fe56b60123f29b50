import { FAST_DEV_SERVER, SECOND_NAMESPACE, startRedis, startTemporal } from '../sample-workflows/services';
import { services } from './global-teardown';

/**
 * Start (or find) the real services once for the whole run and hand their addresses to every
 * test through REDIS_URL and TEMPORAL_ADDRESS. A missing service fails the run with a message
 * saying how to get it; nothing is skipped. No embedded Redis here (only the demo has that
 * fallback): a suite that silently built its own Redis would hide a missing install.
 */
export default async function globalSetup(): Promise<void> {
  // With the Redis-only project selected too, its setup ran first: startRedis finds REDIS_URL.
  const redis = await startRedis();
  services().push(redis);
  process.env.REDIS_URL = redis.url;
  const temporal = await startTemporal({ dynamicConfig: FAST_DEV_SERVER, namespaces: [SECOND_NAMESPACE] });
  services().push(temporal);
  process.env.TEMPORAL_ADDRESS = temporal.address;
  process.stdout.write(`\nservices: redis ${redis.url} (${redis.description}), temporal ${temporal.address} (${temporal.source})\n`);
}
