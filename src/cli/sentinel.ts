import type { Redis } from 'ioredis';
import { describeMasters, listMasters, sentinelMasters } from '../core/deployment/sentinel';
import { CliError, EXIT } from './exit-codes';

/**
 * Refuse a node that is a Redis Sentinel. It answers PING and INFO like a data node, but holds no
 * keys and runs no scripts: every command would report it as empty, or as a Redis whose eviction
 * policy and scripting are at fault. The refusal names the masters it monitors, which are what
 * `--redis` should name. `shownUrl` is the URL as messages print it (password redacted).
 */
export async function refuseSentinel(client: Redis, shownUrl: string, source: string): Promise<void> {
  const masters = await sentinelMasters(client);
  if (masters === undefined) return;
  const instead = masters.length === 0 ? describeMasters(masters) : `point it at the master it monitors (${listMasters(masters)})`;
  throw new CliError(`${source} names a Redis Sentinel (${shownUrl}), which holds no keys: ${instead}`, EXIT.usage);
}
