import { FireOnceError, FireOnceStoreUnavailable, type FireOnceErrorContext } from './errors';

/**
 * Every Redis call of the guard, bounded by `storeTimeoutMs`: past it the call fails closed with
 * {@link FireOnceStoreUnavailable}. ioredis keeps a command queued while Redis is unreachable and
 * runs it once Redis is back, so a call that timed out may still land later; the error carries
 * that call as `late`, so the caller can find out and report what really happened.
 */
export class StoreCalls {
  constructor(private readonly timeoutMs: number) {}

  /**
   * Await `op` for at most the timeout. `context` is built only on failure. `onTimeout` runs when
   * the timeout fires, before the caller hears of it.
   */
  run<T>(context: () => FireOnceErrorContext, op: Promise<T>, onTimeout?: () => void): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        onTimeout?.();
        reject(new FireOnceStoreUnavailable(`Redis did not answer within ${this.timeoutMs} ms`, context(), { late: op }));
      }, this.timeoutMs);
      op.then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (err: unknown) => {
          clearTimeout(timer);
          if (timedOut) return;
          if (err instanceof FireOnceError) return reject(err);
          const message = err instanceof Error ? err.message : String(err);
          reject(new FireOnceStoreUnavailable(`Redis call failed: ${message}`, context(), { cause: err }));
        },
      );
    });
  }
}
