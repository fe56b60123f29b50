/**
 * Dispatches are counted by the job itself, never by the guard: every dispatch INCRs its scope's
 * counter, a key in the scope's hash-tag slot. This reads them back and tallies.
 */
import type { Cluster, Redis } from 'ioredis';

/** The counter one scope's job INCRs on each dispatch. */
export function dispatchCounterKey(prefix: string, scope: string): string {
  return `${prefix}:dispatches:{${scope}}`;
}

/** What the counters say after a run. */
export interface DispatchTally {
  readonly scopes: number;
  /** Sum of every counter. */
  readonly dispatches: number;
  /** Dispatches beyond the first, summed over scopes. */
  readonly duplicates: number;
  /** Scopes whose counter is 0: a job that never ran. */
  readonly missing: number;
}

/** Read every scope's counter (in chunks of concurrent GETs) and tally them. */
export async function tallyDispatches(client: Redis | Cluster, prefix: string, scopes: readonly string[]): Promise<DispatchTally> {
  let dispatches = 0;
  let duplicates = 0;
  let missing = 0;
  for (let i = 0; i < scopes.length; i += 1000) {
    const counts = await Promise.all(scopes.slice(i, i + 1000).map(async (scope) => Number((await client.get(dispatchCounterKey(prefix, scope))) ?? 0)));
    for (const n of counts) {
      dispatches += n;
      duplicates += Math.max(n - 1, 0);
      if (n === 0) missing++;
    }
  }
  return { scopes: scopes.length, dispatches, duplicates, missing };
}
