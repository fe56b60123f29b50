import { Runtime } from '@temporalio/worker';
import { checkWorkerRedis } from '../core/deployment/worker-check';
import type { ResolvedPluginOptions } from './options';

/**
 * The plugin's start check: {@link checkWorkerRedis} (a data node, not a sentinel's address; a
 * Redis that cannot evict the guard's keys; the database the client names) with the plugin's
 * `allowEvictingRedis` and `storeTimeoutMs`. An evicting Redis let through by `allowEvictingRedis`
 * is logged at WARN through the Temporal runtime's logger. Each call reads Redis again; the
 * plugin calls it once.
 */
export function checkPluginRedis(options: ResolvedPluginOptions): Promise<void> {
  return checkWorkerRedis(options.redis, {
    allowEvictingRedis: options.allowEvictingRedis,
    timeoutMs: options.storeTimeoutMs,
    warn: (message, meta) => Runtime.instance().logger.warn(message, meta),
  });
}
