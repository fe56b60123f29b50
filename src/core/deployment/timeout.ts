import { FireOnceError, FireOnceStoreUnavailable } from '../errors';
import { isCluster, type RedisClient } from '../scripts';
import { addressOf } from './nodes';

/**
 * Run one read of the start checks within `timeoutMs`. A Redis that does not answer in time is
 * `FireOnceStoreUnavailable` "Redis at `<address>` did not answer within … ms while `<what>`",
 * with the last error the client reported meanwhile (a refused connection, an unknown host), and
 * one that fails is `FireOnceStoreUnavailable` "could not read `<noun>`: …"; the check's own
 * `FireOnceError`s pass through.
 */
export async function withinTimeout<T>(
  redis: RedisClient,
  timeoutMs: number,
  read: { readonly what: string; readonly noun: string },
  op: () => Promise<T>,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let lastError: Error | undefined;
  const noteError = (err: Error) => (lastError = err);
  redis.on('error', noteError);
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const where = isCluster(redis) ? 'The Redis Cluster' : `Redis at ${addressOf(redis)}`;
      const why = lastError === undefined ? '' : ` (last error: ${lastError.message})`;
      reject(new FireOnceStoreUnavailable(`${where} did not answer within ${timeoutMs} ms while ${read.what}${why}`));
    }, timeoutMs);
  });
  try {
    return await Promise.race([op(), timeout]);
  } catch (err) {
    if (err instanceof FireOnceError) throw err;
    const message = err instanceof Error ? err.message : String(err);
    throw new FireOnceStoreUnavailable(`could not read ${read.noun}: ${message}`, {}, { cause: err });
  } finally {
    clearTimeout(timer);
    redis.off('error', noteError);
  }
}
