import { CompleteAsyncError } from '@temporalio/activity';
import type { Payload } from '@temporalio/common';
import { FireOnceArtifactTooLarge, FireOnceStoreUnavailable, FireOnceUnstorableResult } from '../core/errors';
import { holderId, type Committed, type Lease, type Settled } from '../core/outcomes';
import { startRenewal, type Renewal } from '../core/renewal';
import { converterFailure, encodeArtifact, resultOf } from './artifact';
import { runWithFireOnceContext } from './context';
import { cacheFor, type GuardedCall } from './guarded-call';
import type { Observer } from './observe';
import type { LockMode } from './options';
import { toApplicationFailure } from './failures';
import { completerOf } from './park';
import { completeWaiters, failWaiters, failWaitersWith, settleWaiters, type Completer } from './hand-over';

const ASYNC_RESULT_WARNING =
  "fire-once: the job completes asynchronously, but in 'result' mode the result it is completed with never reaches the guard: nothing is stored, and every other run of this step waits for the lock's TTL, then dispatches again. Give the activity artifact: { external } and have the completer write that key before it completes the activity";

/**
 * Record the dispatch and run the activity under a held lock, unless the call was cancelled while
 * the lock was taken: then release it and rethrow. In `'lease'` mode the lease is renewed until the activity
 * settles. Failure (cancellation included) releases the lock by compare-and-delete and rethrows
 * the original error. Success stores the artifact, which takes over from the lock in one atomic
 * step (`'result'` mode), or holds the lock for `lockTtlMs` (external artifacts).
 */
export async function dispatch(call: GuardedCall, observer: Observer, lease: Lease, lockMode: LockMode, leaseMs: number): Promise<unknown> {
  const { setup, ctx } = call;
  const log = logContext(lease);
  const holder = { holder: log.holder, fencingToken: lease.fencingToken };
  // Cancelled (or timed out, or shut down) while the lock was being taken, e.g. during an in-slot
  // wait's re-check: run nothing for a call nobody waits for, and give the lock back at once.
  if (ctx.cancellationSignal.aborted) {
    await releaseAfterFailure(call, observer, lease, log);
    throw ctx.cancellationSignal.reason;
  }
  observer.decision('dispatched', holder);
  const renewal =
    lockMode === 'lease'
      ? startRenewal(setup.guard, lease, leaseMs, (err) => {
          observer.decision('lock-lost', holder);
          ctx.log.warn('fire-once: lockLost', { ...log, error: err.message });
        })
      : undefined;
  let unrenewed: AbortSignal | undefined; // 'fixed' mode: a signal that never aborts, built if read
  const fireOnce = {
    scope: lease.target.scope,
    step: lease.target.step,
    jobType: lease.target.jobType,
    lockKey: lease.lockKey,
    fencingToken: lease.fencingToken,
    get signal() {
      return renewal?.signal ?? (unrenewed ??= new AbortController().signal);
    },
    // 'fixed' mode: nothing renews on its own, but asked to, the lock goes back to lockTtlMs.
    renew: () => renewal?.renewNow() ?? setup.guard.extend(lease, leaseMs),
  };
  let result: unknown;
  try {
    result = await runWithFireOnceContext(ctx, fireOnce, call.next);
  } catch (err) {
    renewal?.stop();
    // Completing asynchronously is neither success nor failure: the job is still running, so
    // the lock stays (held for lockTtlMs, since nothing renews it any more).
    if (err instanceof CompleteAsyncError) {
      if (lease.target.externalArtifactKey === undefined) call.ctx.log.warn(ASYNC_RESULT_WARNING, log);
      await hold(call, lease, log, renewal);
    } else await releaseAfterFailure(call, observer, lease, log);
    throw err;
  }
  renewal?.stop();
  if (lease.target.externalArtifactKey !== undefined) {
    await hold(call, lease, log, renewal);
    return result;
  }
  return commitResult(call, observer, lease, log, renewal, result);
}

async function commitResult(
  call: GuardedCall,
  observer: Observer,
  lease: Lease,
  log: LogContext,
  renewal: Renewal | undefined,
  result: unknown,
): Promise<unknown> {
  const { setup, options, ctx } = call;
  let payload: Payload;
  try {
    payload = setup.payloadConverter.toPayload(result);
  } catch (err) {
    const unstorable = new FireOnceUnstorableResult(
      `the result of ${ctx.info.activityType} cannot be serialised by the payload converter (${converterFailure(err)}); the lock is kept until its TTL`,
      { ...log, jobType: lease.target.jobType, activityType: ctx.info.activityType },
    );
    // Parked waiters would get nothing either: they fail as the holder does, for good.
    const failure = toApplicationFailure(unstorable, { activityType: ctx.info.activityType });
    await hold(call, lease, log, renewal, (completer, waiters) => failWaitersWith(completer, waiters, failure));
    throw unstorable;
  }
  // Stored or not, the result in hand is what any waiter parked on this dispatch gets.
  const handResult: HandOver = (completer, waiters) => completeWaiters(completer, waiters, payload);
  let bytes: Buffer;
  try {
    bytes = await encodeArtifact(payload, setup.payloadCodecs);
  } catch (err) {
    ctx.log.error('fire-once: the payload codec failed on the result; result delivered, not stored, lock held for lockTtlMs', {
      ...log,
      error: (err as Error).message,
    });
    // The completions of the holder and of its waiters run the same codec: a waiter whose
    // completion it refuses again is failed with its error, as Temporal fails the holder.
    await hold(call, lease, log, renewal, handResult);
    return resultOf(payload, setup.payloadConverter);
  }
  const max = setup.defaults.maxArtifactBytes;
  if (bytes.length > max) {
    const err = new FireOnceArtifactTooLarge(`artifact of ${bytes.length} bytes exceeds maxArtifactBytes (${max}); not stored, lock held for lockTtlMs`, log);
    ctx.log.error(`fire-once: ${err.message}`, { ...log, type: err.type });
    await hold(call, lease, log, renewal, handResult);
    return resultOf(payload, setup.payloadConverter);
  }
  const artifactTtlMs = options.artifactTtlMs ?? setup.guard.options.artifactTtlMs;
  const cache = cacheFor(call, lease.target.namespace);
  const mark = cache?.mark();
  const committed = async (settled: Committed, late: boolean) => {
    const holder = { holder: log.holder, fencingToken: lease.fencingToken, ...(late ? { late: true } : {}) };
    if (!settled.stored) {
      observer.decision('commit-refused', holder);
      ctx.log.warn(
        "fire-once: result delivered, not stored: this holder lost its lock (lockTtlMs or leaseMs below the job time, or fire-once release --force), and a newer holder's lock or result stands",
        log,
      );
      return;
    }
    cache?.set(lease.artifactKey, bytes, lease.target.argsHash ?? '', artifactTtlMs, mark);
    await handOver(call, lease, settled, log, handResult);
    observer.decision('committed', holder);
    if (!settled.ours)
      ctx.log.warn('fire-once: artifact written after the lock had expired or been released (raise lockTtlMs or leaseMs above the job time)', log);
  };
  try {
    await committed(await setup.guard.commit(lease, bytes, { artifactTtlMs }), false);
  } catch (err) {
    // The job ran and its result is in hand: deliver it. Later invocations stay held off only as
    // long as the lock lives; after that, with no artifact, they would dispatch again. So a commit
    // Redis refused (OOM under noeviction, say: the lock's TTL can still be set then) holds the
    // lock for lockTtlMs, as a result too large to store does; one that timed out may land yet.
    followLate(call, err, 'commit', 'the artifact', {
      landed: (settled) => void committed(settled as Committed, true),
      timedOut: 'result delivered; whether the artifact is stored is unknown until Redis answers, and the lock is left to its TTL',
      failed: 'could not store the artifact; result delivered, lock held for lockTtlMs',
    });
    if (!(err instanceof FireOnceStoreUnavailable && err.late !== undefined)) await hold(call, lease, log, renewal, handResult);
  }
  return resultOf(payload, setup.payloadConverter);
}

/**
 * Keep the lock for `lockTtlMs` after the activity settled without an artifact of ours: the
 * job's own artifact (or nothing) must take over before anyone may dispatch again. With
 * `handOverTo` (a result in hand but not stored), the waiters parked on the lock are taken in the
 * same step and given that outcome; otherwise they stay parked, for the job's own artifact.
 */
async function hold(call: GuardedCall, lease: Lease, log: LogContext, renewal: Renewal | undefined, handOverTo?: HandOver): Promise<void> {
  const { guard } = call.setup;
  // 'fixed' mode: the lock already has lockTtlMs, so its TTL is left as it is.
  const ttl = renewal === undefined ? undefined : (call.options.lockTtlMs ?? guard.options.lockTtlMs);
  if (ttl === undefined && handOverTo === undefined) return;
  const lost = () => call.ctx.log.warn('fire-once: lock lost before it could be held after the dispatch', log);
  const held = async (settled: Settled) => {
    if (!settled.ours) lost();
    else if (handOverTo !== undefined) await handOver(call, lease, settled, log, handOverTo);
  };
  try {
    await held(handOverTo === undefined ? { ours: await guard.extend(lease, ttl!), waiters: [] } : await guard.keep(lease, ttl));
  } catch (err) {
    followLate(call, err, 'hold', 'the lock', {
      landed: (reply) => {
        const settled = typeof reply === 'boolean' ? { ours: reply, waiters: [] } : (reply as Settled);
        if (settled.ours) call.ctx.log.info('fire-once: the hold that timed out landed: lock held for lockTtlMs', log);
        void held(settled);
      },
      timedOut: 'whether the lock is held after the dispatch is unknown until Redis answers; it expires with its lease if not',
      failed: 'could not hold the lock after the dispatch; it expires with its lease',
    });
  }
}

/** Compare-and-delete after a failure; never throws. */
async function releaseAfterFailure(call: GuardedCall, observer: Observer, lease: Lease, log: LogContext): Promise<void> {
  const holder = { holder: log.holder, fencingToken: lease.fencingToken };
  const released = async (settled: Settled, late: boolean) => {
    observer.decision(settled.ours ? 'released-on-failure' : 'release-refused', { ...holder, ...(late ? { late: true } : {}) });
    const why = `the dispatch of step ${JSON.stringify(lease.target.step)} failed; retry to dispatch it again`;
    await handOver(call, lease, settled, log, (completer, waiters) => failWaiters(completer, waiters, why));
    if (settled.ours) call.ctx.log.info('fire-once: dispatch failed, lock released', log);
    else call.ctx.log.warn('fire-once: dispatch failed, lock release refused (expired or held by another holder)', log);
  };
  try {
    await released(await call.setup.guard.release(lease), false);
  } catch (err) {
    followLate(call, err, 'release', 'the lock', {
      landed: (settled) => void released(settled as Settled, true),
      timedOut: 'dispatch failed; whether the lock is released is unknown until Redis answers; it expires by its TTL if not',
      failed: 'dispatch failed and releasing the lock failed too; it expires by its TTL',
    });
  }
}

/** What the waiters a commit, release or hold handed over are given (their task tokens): a result or a failure. */
type HandOver = (completer: Completer, waiters: readonly Buffer[]) => Promise<void>;

/** Complete or fail the waiters parked on the lock that commit or release handed over; never throws. */
async function handOver(call: GuardedCall, lease: Lease, settled: Settled, log: LogContext, settle: HandOver) {
  if (settled.waiters.length === 0) return;
  // Only workers without keyNamespace park, so the waiters are of the namespace the keys are filed
  // under. A holder of another Temporal namespace that shares them (keyNamespace) cannot complete
  // their task tokens, nor one without a client: it puts them back for the reap of the worker that
  // parked them (PROTOCOL.md §7).
  const { keyNamespace } = call.setup.defaults;
  const completer = keyNamespace === undefined || keyNamespace === call.ctx.info.namespace ? completerOf(call) : undefined;
  if (completer === undefined) {
    await call.setup.guard.handBack(lease, settled.waiters).catch((err: unknown) =>
      call.ctx.log.error('fire-once: could not hand over parked waiters here, and putting them back failed; their timeouts will end them', {
        ...log,
        waiters: String(settled.waiters.length),
        error: (err as Error).message,
      }),
    );
    return;
  }
  const { argsHash = '', step } = lease.target;
  await call.setup.parkedWatch
    .detached(() => settleWaiters(completer, settled.waiters, argsHash, step, (tokens) => settle(completer, tokens)))
    .catch((err: unknown) => call.ctx.log.error('fire-once: handing over parked waiters failed', { ...log, error: (err as Error).message }));
}

/**
 * A store call failed. If it timed out, ioredis may still run it once Redis is back: say so at
 * once ("unknown"), then report what really happened when it settles. Anything else failed for good.
 */
function followLate(
  { ctx }: GuardedCall,
  err: unknown,
  what: string,
  subject: string,
  report: { readonly landed: (reply: unknown) => void; readonly timedOut: string; readonly failed: string },
): void {
  const log = { ...(err instanceof FireOnceStoreUnavailable ? err.context : {}), error: (err as Error).message };
  const late = err instanceof FireOnceStoreUnavailable ? err.late : undefined;
  if (late === undefined) {
    ctx.log.error(`fire-once: ${report.failed}`, log);
    return;
  }
  ctx.log.error(`fire-once: the ${what} timed out; ${report.timedOut}`, { ...log, outcome: 'unknown' });
  late.then(
    (reply) => {
      ctx.log.warn(`fire-once: the ${what} that timed out landed after all`, { ...log, outcome: 'landed' });
      report.landed(reply);
    },
    (lateErr: unknown) =>
      ctx.log.error(`fire-once: the ${what} that timed out failed: ${subject} was not changed`, {
        ...log,
        outcome: 'failed',
        error: (lateErr as Error).message,
      }),
  );
}

/** What every log line of one dispatch carries; the holder ID (a hash of the token) is computed once. */
type LogContext = Readonly<Record<string, string>> & { readonly holder: string };

function logContext(lease: Lease): LogContext {
  const { scope, step, jobType } = lease.target;
  return { key: lease.lockKey, scope, step, jobType, holder: holderId(lease.token), fencingToken: String(lease.fencingToken) };
}
