import { FireOnceLockLost } from './errors';
import type { FireOnceGuard } from './guard';
import { holderId, type Lease } from './outcomes';
import { MAX_DURATION_MS, positiveInteger } from './options';

/** A running lease renewal. */
export interface Renewal {
  /** Aborted with {@link FireOnceLockLost} when the lock is lost. */
  readonly signal: AbortSignal;
  /** Renew once now, e.g. on an activity heartbeat; resolves false if the lock is lost. */
  renewNow(): Promise<boolean>;
  /** Stop renewing; the lock keeps whatever TTL it has. */
  stop(): void;
}

/**
 * Keep a lease alive: every `leaseMs / 3`, compare-and-expire the lock back to `leaseMs`. If a
 * renewal finds the lock gone or another holder's, the lock is lost: `signal` aborts with
 * {@link FireOnceLockLost}, `onLost` is called once, and renewing stops. If no renewal has
 * succeeded for a whole lease (Redis unreachable, or no replica acknowledging), the lock may be
 * lost: the same signal and call, but renewing goes on, so that a lock Redis still holds for this
 * token (the renewals ran on the primary, or Redis came back with it) stays this holder's.
 *
 * @example
 * ```ts
 * import { FireOnceGuard } from 'temporal-fire-once';
 * import { startRenewal } from 'temporal-fire-once/core';
 * import { Redis } from 'ioredis';
 *
 * export async function withLease(redis: Redis, job: (signal: AbortSignal) => Promise<void>): Promise<void> {
 *   const guard = new FireOnceGuard({ redis });
 *   const outcome = await guard.acquire({ scope: 's', step: 'job', jobType: 'job' }, { lockTtlMs: 30_000 });
 *   if (outcome.kind !== 'acquired') return;
 *   const renewal = startRenewal(guard, outcome.lease, 30_000, (err) => console.warn(err.message));
 *   try {
 *     await job(renewal.signal);
 *   } finally {
 *     renewal.stop();
 *   }
 * }
 * ```
 */
export function startRenewal(guard: FireOnceGuard, lease: Lease, leaseMs: number, onLost: (err: FireOnceLockLost) => void): Renewal {
  // A lease that is no positive integer (NaN, 0) would fail every renewal before Redis, every
  // millisecond, and, as no time is ever "a whole lease", never signal the lapsed lock as lost.
  positiveInteger('ms', MAX_DURATION_MS)('startRenewal: leaseMs', leaseMs);
  // The signal is built on first read: most jobs never read it, and an AbortController costs a few
  // microseconds (bench/RESULTS.md, issue 11). Read after the loss, it is born aborted.
  let controller: AbortController | undefined;
  let lost: FireOnceLockLost | undefined;
  let lastRenewed = Date.now();
  let stopped = false;

  const lose = (why: string, stopRenewing: boolean) => {
    if (stopRenewing) {
      stopped = true;
      clearInterval(timer);
    }
    if (lost !== undefined) return;
    const { scope, step, jobType } = lease.target;
    const err = new FireOnceLockLost(`lost the fire-once lock of step ${JSON.stringify(step)} in scope ${JSON.stringify(scope)}: ${why}`, {
      key: lease.lockKey,
      scope,
      step,
      jobType,
      holder: holderId(lease.token),
    });
    lost = err;
    controller?.abort(err);
    onLost(err);
  };

  const renewNow = async (): Promise<boolean> => {
    if (stopped) return lost === undefined;
    try {
      if (await guard.extend(lease, leaseMs)) {
        lastRenewed = Date.now();
        return true;
      }
      if (!stopped) lose('it expired or passed to another holder', true);
      return false;
    } catch {
      if (!stopped && Date.now() - lastRenewed >= leaseMs) lose(`no renewal succeeded for a whole lease (${leaseMs} ms)`, false);
      return lost === undefined;
    }
  };

  const timer = setInterval(() => void renewNow(), Math.max(Math.floor(leaseMs / 3), 1));
  timer.unref();
  return {
    get signal() {
      if (controller === undefined) {
        controller = new AbortController();
        if (lost !== undefined) controller.abort(lost);
      }
      return controller.signal;
    },
    renewNow,
    stop: () => {
      stopped = true;
      clearInterval(timer);
    },
  };
}
