import { describeEvictionRisk, evictionFix, readEvictionPolicies } from '../core/deployment/eviction';
import type { RedisClient } from '../core/scripts';
import { CliError, EXIT } from './exit-codes';

/**
 * Every command but `doctor` refuses to run on a Redis that can evict the guard's keys, as a
 * worker refuses to start: exit code 6 with what to set. `--allow-evicting-redis` runs it anyway
 * and says so on stderr (`warn`).
 */
export async function refuseEvictingRedis(redis: RedisClient, options: { allow: boolean; timeoutMs: number; warn: (text: string) => void }): Promise<void> {
  const unsafe = (await readEvictionPolicies(redis, options.timeoutMs)).filter((p) => !p.safe);
  if (unsafe.length === 0) return;
  const problem = describeEvictionRisk(unsafe);
  if (!options.allow) throw new CliError(`${problem}. ${evictionFix('pass --allow-evicting-redis')}`, EXIT.evicting);
  options.warn(`fire-once: warning: ${problem}; going on because of --allow-evicting-redis\n`);
}
