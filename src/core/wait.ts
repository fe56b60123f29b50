import { FireOnceInFlight } from './errors';
import type { AcquireOptions, AcquireOutcome, DispatchTarget, FireOnceGuard } from './guard';

/** How {@link waitForTurn} waits. */
export interface WaitOptions {
  /** Time between two acquire attempts. */
  readonly pollIntervalMs: number;
  /** Epoch milliseconds after which waiting gives up with `FireOnceInFlight`. */
  readonly deadline: number;
  /** Aborts the wait; the promise rejects with the signal's reason. */
  readonly signal?: AbortSignal;
  /** Called before each sleep, e.g. to heartbeat. */
  readonly onPoll?: (ttlMs: number) => void;
}

/** An outcome that ends waiting: the artifact appeared or the lock became ours. */
export type TurnOutcome = Exclude<AcquireOutcome, { kind: 'held' }>;

/**
 * Wait while another holder has the lock: re-run the one-round-trip acquire every poll until the
 * artifact appears (fast-forward) or the lock is gone without one (the holder failed, so this
 * caller competes for it again). Gives up with {@link FireOnceInFlight} at the deadline; its
 * `retryAfterMs` is one poll interval (at most the lock's TTL), since a retry waits again.
 */
export async function waitForTurn(
  guard: FireOnceGuard,
  target: DispatchTarget,
  held: Extract<AcquireOutcome, { kind: 'held' }>,
  acquire: AcquireOptions,
  wait: WaitOptions,
): Promise<TurnOutcome> {
  let ttlMs = held.ttlMs;
  for (;;) {
    const remaining = wait.deadline - Date.now();
    if (remaining <= 0) {
      throw new FireOnceInFlight(
        `gave up waiting for the in-flight dispatch of step ${JSON.stringify(target.step)} in scope ${JSON.stringify(target.scope)}`,
        Math.max(Math.min(ttlMs, wait.pollIntervalMs), 0),
        { key: held.lockKey, scope: target.scope, step: target.step, jobType: target.jobType },
      );
    }
    wait.onPoll?.(ttlMs);
    await sleep(Math.min(wait.pollIntervalMs, remaining), wait.signal);
    const outcome = await guard.acquire(target, acquire);
    if (outcome.kind !== 'held') return outcome;
    ttlMs = outcome.ttlMs;
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
