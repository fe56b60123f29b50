import type { Context } from '@temporalio/activity';
import type { PayloadCodec, PayloadConverter } from '@temporalio/common';
import type { ActivityExecuteInput } from '@temporalio/worker';
import type { ArtifactCache } from '../core/artifact-cache';
import type { DispatchLog } from '../core/dispatch-log';
import type { FireOnceGuard } from '../core/guard';
import type { ParkingLot } from '../core/parking';
import type { WakeHub } from '../core/wake';
import type { FireOnceOptions } from './activity-options';
import type { ActivityDefaults } from './options';
import type { ParkedWatch } from './parked-watch';

/** The interceptor's configuration once checked: every default filled in. */
export interface InterceptorSetup {
  readonly guard: FireOnceGuard;
  readonly defaults: ActivityDefaults;
  readonly payloadConverter: PayloadConverter;
  readonly payloadCodecs: readonly PayloadCodec[];
  readonly wake: WakeHub | undefined;
  readonly dispatchLog: DispatchLog | undefined;
  readonly cache: ArtifactCache | undefined;
  readonly parking: ParkingLot;
  readonly parkedWatch: ParkedWatch;
  /** Aborted as the worker begins to shut down; `undefined` when nobody says. */
  readonly workerStopping: AbortSignal | undefined;
}

/** One guarded call: everything the decision and the dispatch need. */
export interface GuardedCall {
  readonly setup: InterceptorSetup;
  readonly options: FireOnceOptions;
  readonly ctx: Context;
  readonly input: ActivityExecuteInput;
  readonly next: () => Promise<unknown>;
  /** When this attempt began on this worker: its start-to-close timeout runs from about then. */
  readonly startedMs: number;
}

/** The caches already warned about, with the channels they do not follow. */
const warned = new WeakMap<ArtifactCache, Set<string>>();

/**
 * The local cache for a call whose keys are filed under `namespace`, or `undefined` when there is
 * none or it does not follow that namespace's invalidations (a cache attached by hand to another
 * namespace's channel): it would go on serving an artifact invalidated elsewhere. WARNs once per channel.
 */
export function cacheFor({ setup, ctx }: Pick<GuardedCall, 'setup' | 'ctx'>, namespace: string | undefined): ArtifactCache | undefined {
  const { cache } = setup;
  if (cache === undefined) return undefined;
  const channel = setup.guard.keysFor(namespace).invalidations();
  if (cache.follows(channel)) return cache;
  const seen = warned.get(cache) ?? new Set<string>();
  warned.set(cache, seen);
  if (!seen.has(channel)) {
    seen.add(channel);
    ctx.log.warn(
      `fire-once: the local cache is not attached to namespace ${JSON.stringify(namespace)}'s invalidations (${channel}): its calls are not cached; attach it with cache.attach(hub, [guard.keysFor(namespace).invalidations()])`,
      { channel },
    );
  }
  return undefined;
}
