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
