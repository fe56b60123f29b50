import { Runtime } from '@temporalio/worker';
import { checkSelectedDatabase } from '../core/deployment/database';
import { checkEvictionPolicy } from '../core/deployment/eviction';
import { refuseSentinelClient } from '../core/deployment/sentinel';
import type { ResolvedPluginOptions } from './options';

/**
 * What a worker checks of its Redis before it takes a task: that Redis cannot evict the guard's
 * keys (`maxmemory-policy noeviction` on the primary or every Cluster master), and that the client
 * is in the database it names, on a data node (not a sentinel's address). Throws `FireOnceConfigError` otherwise; an evicting Redis is let
 * through when `allowEvictingRedis` is set: then the worker starts and the risk is logged at WARN
 * through the Temporal runtime's logger. Each call reads the policy again; the plugin calls it once.
 */
export async function checkWorkerRedis(options: ResolvedPluginOptions): Promise<void> {
  await refuseSentinelClient(options.redis, options.storeTimeoutMs);
  await checkEvictionPolicy(options.redis, {
    allowEvictingRedis: options.allowEvictingRedis,
    timeoutMs: options.storeTimeoutMs,
    warn: (message, meta) => Runtime.instance().logger.warn(message, meta),
  });
  await checkSelectedDatabase(options.redis, options.storeTimeoutMs);
}
