import { CompleteAsyncError, type Context } from '@temporalio/activity';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import { FireOnceArtifactTooLarge, FireOnceUnstorableResult } from '../core/errors';
import { holderId, type FireOnceGuard, type Lease } from '../core/guard';
import { startRenewal, type Renewal } from '../core/renewal';
import type { LockMode } from './activity-options';
import { encodeArtifact, resultOf } from './artifact';
import { runWithFireOnceContext } from './context';
import type { GuardedCall } from './interceptor';
import type { Observer } from './observe';

/**
 * Run the activity under a held lock. In `'lease'` mode the lease is renewed until the activity
 * settles. Failure (cancellation included) releases the lock by compare-and-delete and rethrows
 * the original error. Success stores the artifact (`'result'` mode) or holds the lock for
 * `lockTtlMs` (external artifacts); the lock is never released on success.
 */
export async function dispatch(call: GuardedCall, observer: Observer, lease: Lease, lockMode: LockMode, leaseMs: number): Promise<unknown> {
  const { config, ctx } = call;
  const log = logContext(lease);
  const holder = { holder: log.holder, fencingToken: lease.fencingToken };
  const renewal =
    lockMode === 'lease'
      ? startRenewal(config.guard, lease, leaseMs, (err) => {
          observer.decision('lock-lost', holder);
          ctx.log.warn('fire-once: lockLost', { ...log, error: err.message });
        })
      : undefined;
  const fireOnce = {
    scope: lease.target.scope,
    step: lease.target.step,
    jobType: lease.target.jobType,
    lockKey: lease.lockKey,
    fencingToken: lease.fencingToken,
    signal: renewal?.signal ?? new AbortController().signal,
    renew: () => renewal?.renewNow() ?? Promise.resolve(true),
  };
  let result: unknown;
  try {
    result = await runWithFireOnceContext(fireOnce, call.next);
  } catch (err) {
    renewal?.stop();
    // Completing asynchronously is neither success nor failure: the job is still running, so
    // the lock stays (held for lockTtlMs, since nothing renews it any more).
    if (err instanceof CompleteAsyncError) await hold(call, lease, renewal);
    else observer.decision((await releaseAfterFailure(config.guard, ctx, lease, log)) ? 'released-on-failure' : 'release-refused', holder);
    throw err;
  }
  renewal?.stop();
  if (lease.target.externalArtifactKey !== undefined) {
    await hold(call, lease, renewal);
    return result;
  }
  return commitResult(call, observer, lease, renewal, result);
}

async function commitResult(call: GuardedCall, observer: Observer, lease: Lease, renewal: Renewal | undefined, result: unknown): Promise<unknown> {
  const { config, options, ctx } = call;
  const log = logContext(lease);
  let payload: Payload;
  try {
    payload = (config.payloadConverter ?? defaultPayloadConverter).toPayload(result);
  } catch (err) {
    await hold(call, lease, renewal);
    // The converter's own message quotes the value it failed on, i.e. the result: it must not
    // reach logs or the workflow's history, so only its error class is named.
    const kind = err instanceof Error ? err.constructor.name : typeof err;
    throw new FireOnceUnstorableResult(
      `the result of ${ctx.info.activityType} cannot be serialised by the payload converter (${kind}); the lock is kept until its TTL`,
      { ...log, jobType: lease.target.jobType, activityType: ctx.info.activityType },
    );
  }
  try {
    const bytes = await encodeArtifact(payload, config.payloadCodecs ?? []);
    const max = config.maxArtifactBytes ?? 1024 * 1024;
    if (bytes.length > max) {
      const err = new FireOnceArtifactTooLarge(`artifact of ${bytes.length} bytes exceeds maxArtifactBytes (${max}); not stored, lock held for lockTtlMs`, log);
      ctx.log.error(`fire-once: ${err.message}`, { ...log, type: err.type });
      await hold(call, lease, renewal);
    } else {
      const artifactTtlMs = options.artifactTtlMs ?? config.guard.options.artifactTtlMs;
      const stillOurs = await config.guard.commit(lease, bytes, { artifactTtlMs });
      config.cache?.set(lease.artifactKey, bytes, lease.target.argsHash ?? '', artifactTtlMs);
      observer.decision('committed', { holder: log.holder, fencingToken: lease.fencingToken });
      if (!stillOurs) ctx.log.warn('fire-once: artifact written after the lock had expired; raise lockTtlMs or leaseMs above the job time', log);
    }
  } catch (err) {
    // The job ran and its result is in hand: deliver it. Later invocations stay held off only as
    // long as the lock lives; after that, with no artifact, they would dispatch again.
    ctx.log.error('fire-once: could not store the artifact; result delivered, lock left to its TTL', { ...log, error: (err as Error).message });
  }
  return resultOf(payload, config.payloadConverter);
}

/**
 * Keep the lock for `lockTtlMs` after the activity settled without an artifact of ours: the
 * job's own artifact (or nothing) must take over before anyone may dispatch again.
 */
async function hold(call: GuardedCall, lease: Lease, renewal: Renewal | undefined): Promise<void> {
  if (renewal === undefined) return; // 'fixed' mode: the lock already has lockTtlMs
  const ttl = call.options.lockTtlMs ?? call.config.guard.options.lockTtlMs;
  try {
    if (!(await call.config.guard.extend(lease, ttl))) call.ctx.log.warn('fire-once: lock lost before it could be held after the dispatch', logContext(lease));
  } catch (err) {
    call.ctx.log.error('fire-once: could not hold the lock after the dispatch; it expires with its lease', { ...logContext(lease), error: (err as Error).message });
  }
}

/** Compare-and-delete after a failure; never throws. Resolves whether the lock was released. */
async function releaseAfterFailure(guard: FireOnceGuard, ctx: Context, lease: Lease, log: Record<string, string>): Promise<boolean> {
  try {
    if (await guard.release(lease)) {
      ctx.log.info('fire-once: dispatch failed, lock released', log);
      return true;
    }
    ctx.log.warn('fire-once: dispatch failed, lock release refused (expired or held by another holder)', log);
  } catch (err) {
    ctx.log.error('fire-once: dispatch failed and releasing the lock failed too; it expires by its TTL', { ...log, error: (err as Error).message });
  }
  return false;
}

function logContext(lease: Lease): Record<string, string> {
  const { scope, step, jobType } = lease.target;
  return { key: lease.lockKey, scope, step, jobType, holder: holderId(lease.token), fencingToken: String(lease.fencingToken) };
}
