import { CompleteAsyncError } from '@temporalio/activity';
import type { DispatchTarget } from '../core/guard';
import type { TurnOutcome } from '../core/wait';
import type { GuardedCall } from './interceptor';
import type { Observer } from './observe';
import type { Completer } from './parked';

/** The most times a waiter finds the lock gone and held again between two round trips before it waits in its slot. */
const MAX_PARK_TRIES = 5;

/**
 * `'park'`: register this activity's task token on the held lock and complete asynchronously,
 * so it holds no worker slot while the holder's job runs (docs/parked-waiters.md). If the result
 * appeared or the lock was freed in the meantime, the call goes on at once: fast-forward, or
 * acquire. A local activity, or a worker with no Temporal client (a test environment without
 * one), waits in its slot instead.
 */
export async function parkOrWait(
  call: GuardedCall,
  target: DispatchTarget,
  observer: Observer,
  acquireOptions: { readonly lockTtlMs: number },
  waitInSlot: () => Promise<TurnOutcome>,
): Promise<TurnOutcome> {
  const { setup, ctx } = call;
  const completer = ctx.info.isLocal ? undefined : completerOf(call);
  if (completer === undefined) return waitInSlot();
  for (let tries = 0; tries < MAX_PARK_TRIES; tries++) {
    const parked = await setup.parking.park(target, ctx.info.taskToken);
    if (parked.kind === 'fast-forward') return parked;
    if (parked.kind === 'free') {
      const again = await setup.guard.acquire(target, acquireOptions);
      if (again.kind !== 'held') return again;
      continue;
    }
    setup.parkedWatch.watch(parked.spot, completer, ctx.info.taskToken, ctx.info.heartbeatTimeoutMs);
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

/** How this activity's worker completes task tokens, or `undefined` without a client. */
export function completerOf({ setup, ctx }: Pick<GuardedCall, 'setup' | 'ctx'>): Completer | undefined {
  try {
    return { client: ctx.client, log: ctx.log, payloadConverter: setup.payloadConverter, payloadCodecs: setup.payloadCodecs };
  } catch {
    return undefined; // MockActivityEnvironment without a client
  }
}
