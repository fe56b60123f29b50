import { FireOnceConfigError, FireOnceInFlight, describe } from './errors';
import type { FireOnceGuard } from './guard';
import type { AcquireOptions, AcquireOutcome } from './outcomes';
import type { DispatchTarget } from './target';
import { MAX_TIMER_MS, checkKnownKeys, positiveInteger } from './options';
import { atMost } from './store-calls';
import type { WakeHub } from './wake';

/** How {@link waitForTurn} waits. */
export interface WaitOptions {
  /** Time between two acquire attempts; with `wake`, the fallback for lost messages. */
  readonly pollIntervalMs: number;
  /** Epoch milliseconds after which waiting gives up with `FireOnceInFlight`. */
  readonly deadline: number;
  /**
   * Aborts the wait; the promise rejects with the signal's reason. An acquire already sent when it
   * aborts still returns its outcome, the lock included: check the signal before acting on it.
   */
  readonly signal?: AbortSignal;
  /** Called before each sleep, e.g. to heartbeat. */
  readonly onPoll?: (ttlMs: number) => void;
  /** Wake at once when the holder commits or releases (pub/sub); without it, poll only. */
  readonly wake?: WakeHub;
}

/** An outcome that ends waiting: the artifact appeared or the lock became ours. */
export type TurnOutcome = Exclude<AcquireOutcome, { kind: 'held' }>;

/**
 * Wait while another holder has the lock: re-run the one-round-trip acquire whenever the holder
 * publishes a commit or release, and at least every poll, until the artifact appears
 * (fast-forward) or the lock is gone without one (the holder failed, so this caller competes for
 * it again). Gives up with {@link FireOnceInFlight} at the deadline; its `retryAfterMs` is one
 * poll interval (at most the lock's TTL), since a retry waits again.
 *
 * @example
 * ```ts
 * import { FireOnceGuard } from 'temporal-fire-once';
 * import { WakeHub, waitForTurn } from 'temporal-fire-once/core';
 * import { Redis } from 'ioredis';
 *
 * export async function acquireOrWait(redis: Redis) {
 *   const guard = new FireOnceGuard({ redis });
 *   const target = { scope: 'session-42', step: 'summarise', jobType: 'summary' };
 *   const first = await guard.acquire(target);
 *   if (first.kind !== 'held') return first;
 *   const wake = new WakeHub(redis);
 *   try {
 *     return await waitForTurn(guard, target, first, {}, { pollIntervalMs: 250, deadline: Date.now() + 30_000, wake });
 *   } finally {
 *     wake.close();
 *   }
 * }
 * ```
 */
export async function waitForTurn(
  guard: FireOnceGuard,
  target: DispatchTarget,
  held: Extract<AcquireOutcome, { kind: 'held' }>,
  acquire: AcquireOptions,
  wait: WaitOptions,
): Promise<TurnOutcome> {
  checkWaitOptions(wait);
  const bell = new Bell();
  const channel = await joinWakeChannel(guard, target, wait.wake, () => bell.ring());
  try {
    // Re-check once the subscription is live: a commit between the first acquire and the
    // subscription would otherwise go unnoticed until the next poll.
    let ttlMs = held.ttlMs;
    for (let first = channel.recheck; ; first = false) {
      if (!first) {
        const remaining = wait.deadline - Date.now();
        if (remaining <= 0) {
          throw new FireOnceInFlight(
            `gave up waiting on the lock of step ${JSON.stringify(target.step)} in scope ${JSON.stringify(target.scope)}, held ${ttlMs} ms more: ` +
              'by a dispatch still in flight, or by one that ended without storing its result, whose lock stands until it expires',
            Math.max(Math.min(ttlMs, wait.pollIntervalMs), 0),
            { key: held.lockKey, scope: target.scope, step: target.step, jobType: target.jobType },
          );
        }
        wait.onPoll?.(ttlMs);
        await bell.sleep(Math.min(wait.pollIntervalMs, remaining), wait.signal);
      }
      const outcome = await guard.acquire(target, acquire);
      if (outcome.kind !== 'held') return outcome;
      ttlMs = outcome.ttlMs;
    }
  } finally {
    channel.leave();
  }
}

// Every option, so that one added to WaitOptions and not here fails to compile.
const WAIT_OPTIONS: readonly string[] = Object.keys({
  pollIntervalMs: true,
  deadline: true,
  signal: true,
  onPoll: true,
  wake: true,
} satisfies Record<keyof WaitOptions, true>);

/**
 * A poll interval or deadline that is not a number would make the wait poll Redis every
 * millisecond (a `setTimeout` of `NaN` is 1 ms), and without a finite deadline it never gives up.
 */
function checkWaitOptions(wait: WaitOptions): void {
  checkKnownKeys('waitForTurn', wait, WAIT_OPTIONS);
  // A wait on the wake channel may poll rarely (ten minutes in the cluster suites): only what a timer cannot wait is refused.
  positiveInteger('ms', MAX_TIMER_MS)('waitForTurn: pollIntervalMs', wait.pollIntervalMs);
  if (typeof wait.deadline !== 'number' || !Number.isFinite(wait.deadline)) {
    throw new FireOnceConfigError(`waitForTurn: deadline must be a finite number of epoch milliseconds (got ${describe(wait.deadline)})`);
  }
}

/**
 * Subscribe to the scope's wake channel, waiting at most `storeTimeoutMs` for the subscription.
 * ioredis neither times out nor rejects a SUBSCRIBE that was on the wire when the connection
 * dropped: it re-sends it once Redis is back. A waiter must not hang on that, so a slow join
 * goes on by polling; if the subscription comes up later, it wakes this waiter from then on.
 * `recheck` says time has passed since the caller's acquire, so the lock is asked again at once.
 */
async function joinWakeChannel(
  guard: FireOnceGuard,
  target: DispatchTarget,
  hub: WakeHub | undefined,
  onWake: () => void,
): Promise<{ readonly recheck: boolean; readonly leave: () => void }> {
  if (hub === undefined || !guard.options.publishWakeUps) return { recheck: false, leave: () => undefined };
  let left = false;
  let unsubscribe: (() => void) | undefined;
  const joined = hub.join(guard.keysFor(target.namespace).wakeChannel(target.scope), onWake).then(
    (leave) => {
      if (left) leave();
      else unsubscribe = leave;
    },
    () => undefined, // no subscription: polling alone still ends the wait
  );
  await atMost(joined, guard.options.storeTimeoutMs);
  return {
    recheck: true,
    leave: () => {
      left = true;
      unsubscribe?.();
    },
  };
}

/** A sleep that a wake-up ends early; a wake-up that rings while awake ends the next sleep at once. */
class Bell {
  private pending = false;
  private wake: (() => void) | undefined;

  ring(): void {
    if (this.wake) this.wake();
    else this.pending = true;
  }

  sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      if (this.pending) {
        this.pending = false;
        return resolve();
      }
      const finish = (settle: () => void) => () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.wake = undefined;
        settle();
      };
      const onAbort = finish(() => reject(signal?.reason));
      const timer = setTimeout(finish(resolve), ms);
      this.wake = finish(resolve);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}
