import { CompleteAsyncError } from '@temporalio/activity';
import type { DispatchTarget } from '../core/target';
import type { TurnOutcome } from '../core/wait';
import type { GuardedCall } from './guarded-call';
import type { Observer } from './observe';
import type { Completer } from './hand-over';

/** The most times a waiter finds the lock gone and held again between two round trips before it waits in its slot. */
const MAX_PARK_TRIES = 5;

/**
 * `'park'`: register this activity's task token on the held lock and complete asynchronously,
 * so it holds no worker slot while the holder's job runs (docs/parked-waiters.md). If the result
 * appeared or the lock was freed in the meantime, the call goes on at once: fast-forward, or
 * acquire. It waits in its slot instead when parking cannot work or would cost the run:
 * - a local activity, which cannot complete asynchronously;
 * - a worker with no Temporal client (a test environment without one);
 * - its last attempt (retry policy): a holder's failure fails parked waiters so that they retry,
 *   and this one could not;
 * - keys shared across namespaces (`keyNamespace`): a holder completes waiters with its own
 *   namespace's client, which cannot complete another namespace's activity.
 */
export async function parkOrWait(
  call: GuardedCall,
  target: DispatchTarget,
  observer: Observer,
  acquireOptions: { readonly lockTtlMs: number },
  waitInSlot: () => Promise<TurnOutcome>,
): Promise<TurnOutcome> {
  const { setup, ctx } = call;
  const { info } = ctx;
  const completer = info.isLocal || !canRetry(info) || setup.defaults.keyNamespace !== undefined ? undefined : completerOf(call);
  if (completer === undefined) return waitInSlot();
  for (let tries = 0; tries < MAX_PARK_TRIES; tries++) {
    const parked = await setup.parking.park(target, ctx.info.taskToken);
    if (parked.kind === 'fast-forward') return parked;
    if (parked.kind === 'free') {
      const again = await setup.guard.acquire(target, acquireOptions);
      if (again.kind !== 'held') return again;
      continue;
    }
    // No heartbeat timeout reads as 0: such a waiter is not heartbeated, as 'wait' would not be.
    setup.parkedWatch.watch(parked.spot, completer, ctx.info.taskToken, ctx.info.heartbeatTimeoutMs || undefined, ctx.info.heartbeatDetails);
    observer.decision('in-flight-parked', { fencingToken: parked.fencingToken });
    ctx.log.debug('fire-once: in flight elsewhere, parked until its commit or release', {
      key: parked.spot.waitersKey,
      scope: target.scope,
      step: target.step,
    });
    throw new CompleteAsyncError();
  }
  return waitInSlot();
}

/** Whether Temporal would retry this attempt if it failed retryably. */
function canRetry({ attempt, retryPolicy }: GuardedCall['ctx']['info']): boolean {
  const max = retryPolicy?.maximumAttempts;
  return max === undefined || max === 0 || attempt < max;
}

/** How this activity's worker completes task tokens, or `undefined` without a client. */
export function completerOf({ setup, ctx }: Pick<GuardedCall, 'setup' | 'ctx'>): Completer | undefined {
  try {
    return { client: ctx.client, log: ctx.log, payloadConverter: setup.payloadConverter, payloadCodecs: setup.payloadCodecs };
  } catch {
    return undefined; // MockActivityEnvironment without a client
  }
}
