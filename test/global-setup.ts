import { FAST_DEV_SERVER, SECOND_NAMESPACE, startRedis, startTemporal, type RedisService, type TemporalService } from '../sample-workflows/services';

/**
 * Start (or find) the real services once for the whole run and hand their addresses to every
 * test through REDIS_URL and TEMPORAL_ADDRESS. A missing service fails the run with a message
 * saying how to get it; nothing is skipped. No embedded Redis here (only the demo has that
 * fallback): a suite that silently built its own Redis would hide a missing install.
 */
export default async function globalSetup(): Promise<void> {
  const started: { redis?: RedisService; temporal?: TemporalService } = {};
  (globalThis as { __fireOnceServices?: typeof started }).__fireOnceServices = started;
  started.redis = await startRedis();
  started.temporal = await startTemporal({ dynamicConfig: FAST_DEV_SERVER, namespaces: [SECOND_NAMESPACE] });
  process.env.REDIS_URL = started.redis.url;
  process.env.TEMPORAL_ADDRESS = started.temporal.address;
  process.stdout.write(
    `\nservices: redis ${started.redis.url} (${started.redis.description}), temporal ${started.temporal.address} (${started.temporal.source})\n`,
  );
}
