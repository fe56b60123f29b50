import { setTimeout as sleep } from 'node:timers/promises';

/** How long {@link waitFor} keeps polling, and how often. */
export interface Pace {
  /** @defaultValue 30_000 */
  readonly timeoutMs?: number;
  /** @defaultValue 10 */
  readonly everyMs?: number;
}

/** The fault suites': servers and workers are killed and restarted under them, so wait long and poll gently. */
export const FAULT_PACE: Pace = { timeoutMs: 60_000, everyMs: 50 };

/** A replica's or a Sentinel group's: their state changes over seconds, not milliseconds. */
export const REPLICATION_PACE: Pace = { timeoutMs: 30_000, everyMs: 100 };

/** A Sentinel failover's: the sentinels agree, promote and demote, and a replica resyncs, within a minute. */
export const FAILOVER_PACE: Pace = { timeoutMs: 60_000, everyMs: 100 };

/**
 * Poll `check` until it returns something other than `false` or `undefined`, and return that. A
 * check that throws counts as not yet. After `timeoutMs`, throw, saying what was awaited and the
 * last error. Never a timing assertion: only a bound on how long a test may take.
 */
export async function waitFor<T>(what: string, check: () => Promise<T | false | undefined>, { timeoutMs = 30_000, everyMs = 10 }: Pace = {}): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      const why = lastError === undefined ? '' : ` (last error: ${lastError instanceof Error ? lastError.message : String(lastError)})`;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${why}`);
    }
    await sleep(everyMs);
  }
}

/** Map `items` through `fn` with at most `limit` calls in flight, keeping their order. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i], i);
    }
  });
  await Promise.all(lanes);
  return results;
}
