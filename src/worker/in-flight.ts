import { HAND_OFF_HEADER } from '../common/hand-off';
import { FireOnceInFlight, FireOnceWorkerShutdown } from '../core/errors';
import type { AcquireOutcome } from '../core/outcomes';
import type { DispatchTarget } from '../core/target';
import { waitForTurn, type TurnOutcome } from '../core/wait';
import type { GuardedCall } from './guarded-call';
import type { Observer } from './observe';
import { parkOrWait } from './park';

/** The in-flight policy: skip (`undefined`), fail, park, or wait for the artifact or the lock. */
export async function onHeld(
  call: GuardedCall,
  target: DispatchTarget,
  observer: Observer,
  held: Extract<AcquireOutcome, { kind: 'held' }>,
  acquireOptions: { readonly lockTtlMs: number },
): Promise<TurnOutcome | undefined> {
  const { setup, options, ctx } = call;
  const policy = options.onInFlight ?? setup.defaults.onInFlight;
  const context = { key: held.lockKey, scope: target.scope, step: target.step, jobType: target.jobType };
  if (policy === 'skip') {
    observer.decision('in-flight-skipped', { fencingToken: held.fencingToken });
    ctx.log.info('fire-once: in flight elsewhere, skipped', context);
    return undefined;
  }
  if (policy === 'fail') {
    observer.decision('in-flight-failed', { fencingToken: held.fencingToken });
    throw new FireOnceInFlight(`step ${JSON.stringify(target.step)} is in flight in scope ${JSON.stringify(target.scope)}`, failRetryDelay(held), context);
  }
  const waitInSlot = () => waitInSlotFor(call, target, observer, held, acquireOptions);
  return policy === 'park' ? parkOrWait(call, target, observer, acquireOptions, waitInSlot) : waitInSlot();
}

/**
 * The retry delay of `'fail'`: half the time the holder has run so far (its fencing token is its
 * start on the Redis clock), at least 100 ms and at most the lock's TTL left. A waiter that comes
 * back soon after a short job's result exists, and backs off as a long job runs on, with no fixed cap.
 */
export function failRetryDelay(held: { readonly ttlMs: number; readonly fencingToken: number }, now = Date.now()): number {
  const elapsedMs = Math.max(now - held.fencingToken / 1000, 0);
  return Math.min(Math.max(Math.round(elapsedMs / 2), MIN_FAIL_RETRY_DELAY_MS), Math.max(held.ttlMs, MIN_FAIL_RETRY_DELAY_MS));
}
const MIN_FAIL_RETRY_DELAY_MS = 100;

/** `'wait'`: hold the worker slot until the artifact exists or the lock is free. */
async function waitInSlotFor(
  call: GuardedCall,
  target: DispatchTarget,
  observer: Observer,
  held: Extract<AcquireOutcome, { kind: 'held' }>,
  acquireOptions: { readonly lockTtlMs: number },
): Promise<TurnOutcome> {
  const started = performance.now();
  const stopping = handOffSignal(call);
  const ends = stopping === undefined ? undefined : firstOf(call.ctx.cancellationSignal, stopping);
  try {
    const signal = ends?.signal ?? call.ctx.cancellationSignal;
    const outcome = await waitForTurn(call.setup.guard, target, held, acquireOptions, waitOptions(call, signal));
    observer.decision('in-flight-waited', { fencingToken: held.fencingToken });
    return outcome;
  } catch (err) {
    // Ended by the shutdown itself, not by a cancellation that came first, nor by Redis.
    const handedOff = ends?.stoppedFirst() === true && err === ends.signal.reason;
    if (err instanceof FireOnceInFlight || handedOff) observer.decision('in-flight-failed', { fencingToken: held.fencingToken });
    if (handedOff) {
      throw new FireOnceWorkerShutdown(
        `this worker began to shut down while the local activity waited for the in-flight dispatch of step ${JSON.stringify(target.step)} in scope ${JSON.stringify(target.scope)}: its workflow schedules it again, for its next worker`,
        { key: held.lockKey, scope: target.scope, step: target.step, jobType: target.jobType },
      );
    }
    throw err;
  } finally {
    ends?.dispose();
    observer.waitTime(performance.now() - started);
  }
}

/**
 * A signal that aborts as the first of `cancelled` and `stopping` does, with its reason, and which
 * of them that was; `dispose` takes its listeners off both. Not `AbortSignal.any`: on Node 20 the
 * worker's `stopping` would keep every wait's combined signal referenced for as long as the
 * worker runs, and a `stopping` not made by Node's own AbortController (a polyfill's) would never
 * abort it.
 */
function firstOf(cancelled: AbortSignal, stopping: AbortSignal) {
  const controller = new AbortController();
  let stopped = false;
  const onCancel = () => controller.abort(cancelled.reason);
  const onStop = () => {
    if (controller.signal.aborted) return;
    stopped = true;
    controller.abort(stopping.reason);
  };
  if (cancelled.aborted) onCancel();
  else if (stopping.aborted) onStop();
  else {
    cancelled.addEventListener('abort', onCancel, { once: true });
    stopping.addEventListener('abort', onStop, { once: true });
  }
  return {
    signal: controller.signal,
    stoppedFirst: () => stopped,
    dispose: () => {
      cancelled.removeEventListener('abort', onCancel);
      stopping.removeEventListener('abort', onStop);
    },
  };
}

/**
 * The worker's shutdown, for a local activity whose workflow takes its wait back when it ends
 * (`common/hand-off.ts`); `undefined` for any other call, or a worker that does not say when it
 * stops: their wait goes on, as a remote activity's does until the SDK cancels it.
 */
function handOffSignal({ setup, ctx, input }: GuardedCall): AbortSignal | undefined {
  return ctx.info.isLocal && input.headers[HAND_OFF_HEADER] !== undefined ? setup.workerStopping : undefined;
}

function waitOptions({ setup, ctx, startedMs }: GuardedCall, signal: AbortSignal) {
  const { info } = ctx;
  const heartbeatMs = info.heartbeatTimeoutMs;
  const pollIntervalMs = Math.min(setup.defaults.pollIntervalMs, heartbeatMs ? Math.max(Math.floor(heartbeatMs / 2), 1) : Infinity);
  const startToClose = info.startToCloseTimeoutMs;
  // Give up before Temporal times this attempt out, so the failure is ours and says why. The
  // timeout runs from the attempt's start, which the worker sees as `startedMs`: not from
  // `currentAttemptScheduledTimestampMs`, which for a local activity is its first attempt's
  // schedule (every retry would be past its deadline at once) and which counts queue time too.
  const margin = Math.min(1_000, Math.floor(startToClose * 0.2));
  // Nor past the schedule-to-close timeout, which runs from the first attempt's schedule over every
  // attempt: an activity Temporal has timed out must not go on to dispatch from its slot. One that
  // ends before this attempt began is no real timeout (Temporal starts no attempt past it): a
  // MockActivityEnvironment's defaults, or a clock far off the server's.
  const scheduleToCloseEnd = info.scheduledTimestampMs + info.scheduleToCloseTimeoutMs;
  const overall = info.scheduleToCloseTimeoutMs > 0 && scheduleToCloseEnd > startedMs ? scheduleToCloseEnd - margin : Infinity;
  return {
    pollIntervalMs,
    deadline: Math.min(startedMs + startToClose - margin, overall),
    signal,
    // Each heartbeat replaces the activity's details, which outlive the attempt: a waiter, which
    // runs none of the job, passes on those an earlier attempt recorded.
    onPoll: heartbeatMs ? () => ctx.heartbeat(info.heartbeatDetails) : undefined,
    wake: setup.wake,
  };
}
