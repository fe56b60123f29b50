/**
 * temporal-fire-once, worker side: the Temporal plugin, the activity markers, the fire-once
 * context, the core guard and the failure types. The workflow side is
 * `temporal-fire-once/workflow`; building blocks for hand-wired workers and tools are on
 * `temporal-fire-once/core`.
 *
 * @packageDocumentation
 */

// The Temporal plugin and what guarded activities write.
export { FireOncePlugin } from './worker/plugin';
export { FIRE_ONCE_DEFAULTS } from './worker/options';
export type { FireOncePluginOptions } from './worker/options';
export { fireOnce, FireOnce } from './worker/fire-once';
export type { FireOnceOptions } from './worker/activity-options';
export { fireOnceContext } from './worker/context';
export type { FireOnceContext } from './worker/context';

// The core guard, Redis only.
export { FireOnceGuard } from './core/guard';
export type { AcquireOutcome, Lease } from './core/outcomes';
export type { DispatchTarget } from './core/target';
export type { FireOnceGuardOptions } from './core/options';

// Failure types: each one's `type` is the ApplicationFailure type a workflow sees.
export {
  FireOnceError,
  FireOnceConfigError,
  FireOnceMissingScope,
  FireOnceInvalidId,
  FireOnceInFlight,
  FireOnceStoreUnavailable,
  FireOnceCorruptArtifact,
  FireOnceUnstorableResult,
  FireOnceKeyConflict,
  FireOnceLockLost,
  FireOnceArtifactTooLarge,
  FireOnceProtocolError,
} from './core/errors';
