import { FireOnceError, FireOnceKeyConflict } from '../core/errors';
import type { DispatchTarget } from '../core/target';
import { decodeArtifact, storedResultOf } from './artifact';
import { dispatch } from './dispatch';
import { cacheFor, type GuardedCall } from './guarded-call';
import { onHeld } from './in-flight';
import { observe, type Observer } from './observe';
import { resolveTarget } from './resolve-target';

/**
 * Decide one guarded call and carry it out: `observeOnly`, a fast-forward (from the local cache
 * or the stored artifact), the in-flight policy while another call holds the lock, or a dispatch
 * under the lock it acquired.
 */
export async function runGuarded(call: GuardedCall): Promise<unknown> {
  const { setup, options, ctx } = call;
  if (options.observeOnly) return observeOnly(call);
  const target = resolveTarget(call);
  const observer = observe(ctx, target, setup.dispatchLog);
  const { guard } = setup;
  const cache = target.externalArtifactKey === undefined ? cacheFor(call, target.namespace) : undefined;
  if (cache !== undefined) {
    const artifactKey = guard.artifactKey(target);
    const cached = cache.get(artifactKey, target.argsHash ?? '');
    if (cached !== undefined) return fastForward(call, target, observer, { artifact: cached, artifactKey });
  }
  const lockMode = options.lockMode ?? setup.defaults.lockMode;
  const lockTtlMs = lockMode === 'lease' ? (options.leaseMs ?? setup.defaults.leaseMs) : (options.lockTtlMs ?? guard.options.lockTtlMs);
  const acquireOptions = { lockTtlMs, readTtl: cache !== undefined };
  const mark = cache?.mark();
  const outcome = await noteConflicts(observer, async () => {
    const started = performance.now();
    const first = await guard.acquire(target, acquireOptions);
    observer.acquireLatency(performance.now() - started);
    return first.kind === 'held' ? onHeld(call, target, observer, first, acquireOptions) : first;
  });
  if (outcome === undefined) return undefined; // skipped

  if (outcome.kind === 'acquired') return dispatch(call, observer, outcome.lease, lockMode, lockTtlMs);
  if (cache !== undefined && outcome.ttlMs !== undefined) cache.set(outcome.artifactKey, outcome.artifact, target.argsHash ?? '', outcome.ttlMs, mark);
  return fastForward(call, target, observer, outcome);
}

/**
 * `observeOnly`: log the call as `dispatched` and run it, never guarded. Measuring must never
 * fail a call, so one the guard would refuse (no scope, a bad ID, an option function that throws)
 * runs too, unlogged, with a WARN naming what the guard would say.
 */
function observeOnly(call: GuardedCall): Promise<unknown> {
  let target: DispatchTarget;
  try {
    target = resolveTarget(call);
  } catch (err) {
    if (!(err instanceof FireOnceError)) throw err;
    call.ctx.log.warn(`fire-once: observeOnly: the guard would refuse this call (${err.name}: ${err.message}); it runs, unlogged`, {
      activityType: call.ctx.info.activityType,
    });
    return call.next();
  }
  observe(call.ctx, target, call.setup.dispatchLog).decision('dispatched');
  return call.next();
}

/** Return the stored result (`'result'` mode) or `undefined` (external artifact) without running. */
async function fastForward(
  { setup, ctx }: GuardedCall,
  target: DispatchTarget,
  observer: Observer,
  found: { readonly artifact: Buffer; readonly artifactKey: string },
): Promise<unknown> {
  observer.decision('fast-forwarded');
  ctx.log.debug('fire-once: artifact found, fast-forward', { key: found.artifactKey, scope: target.scope, jobType: target.jobType });
  if (target.externalArtifactKey !== undefined) return undefined;
  const context = { key: found.artifactKey, scope: target.scope, jobType: target.jobType };
  return storedResultOf(await decodeArtifact(found.artifact, setup.payloadCodecs, context), setup.payloadConverter, context);
}

async function noteConflicts<T>(observer: Observer, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof FireOnceKeyConflict) observer.decision('conflict');
    throw err;
  }
}
