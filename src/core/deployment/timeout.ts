import { FireOnceError, FireOnceStoreUnavailable } from '../errors';

/**
 * Run one read of the start checks within `timeoutMs`. A Redis that does not answer in time is
 * `FireOnceStoreUnavailable` "Redis did not answer within … ms while `<what>`", and one that fails
 * is `FireOnceStoreUnavailable` "could not read `<noun>`: …"; the check's own `FireOnceError`s
 * pass through.
 */
export async function withinTimeout<T>(timeoutMs: number, read: { readonly what: string; readonly noun: string }, op: () => Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new FireOnceStoreUnavailable(`Redis did not answer within ${timeoutMs} ms while ${read.what}`)), timeoutMs);
  });
  try {
    return await Promise.race([op(), timeout]);
  } catch (err) {
    if (err instanceof FireOnceError) throw err;
    const message = err instanceof Error ? err.message : String(err);
    throw new FireOnceStoreUnavailable(`could not read ${read.noun}: ${message}`, {}, { cause: err });
  } finally {
    clearTimeout(timer);
  }
}
