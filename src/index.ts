/**
 * temporal-fire-once, worker side: the Temporal plugin, the activity markers and the core guard.
 * The workflow side is `temporal-fire-once/workflow`.
 *
 * @packageDocumentation
 */

// Floor 1: the core guard, Redis only.
export { FireOnceGuard, holderId } from './core/guard';
export type { AcquireOptions, AcquireOutcome, DispatchTarget, Lease } from './core/guard';
export { waitForTurn } from './core/wait';
export type { TurnOutcome, WaitOptions } from './core/wait';
export { WakeHub } from './core/wake';
export { ArtifactCache, ARTIFACT_CACHE_DEFAULTS } from './core/artifact-cache';
export type { ArtifactCacheOptions } from './core/artifact-cache';
export { DispatchLog, EVENT_FIELDS, parseEvent } from './core/dispatch-log';
export type { Decision, DispatchEvent } from './core/dispatch-log';
export { startRenewal } from './core/renewal';
export type { Renewal } from './core/renewal';
export { FireOnceKeys, MAX_ID_BYTES, encodeId, decodeId } from './core/keys';
export type { IdKind } from './core/keys';
export { GUARD_DEFAULTS } from './core/options';
export type { FireOnceGuardOptions, ResolvedGuardOptions } from './core/options';
export type { RedisClient } from './core/scripts';
export { SAFE_EVICTION_POLICY, checkEvictionPolicy, readEvictionPolicies } from './core/deployment/eviction';
export type { EvictionCheckOptions, EvictionPolicy } from './core/deployment/eviction';
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
} from './core/errors';
export type { FireOnceErrorContext } from './core/errors';

// Floor 2: the Temporal adapter.
export { FireOncePlugin, workflowInterceptorModules } from './worker/plugin';
export { FIRE_ONCE_DEFAULTS } from './worker/plugin-options';
export type { FireOncePluginOptions, ResolvedPluginOptions } from './worker/plugin-options';
export { fireOnce, FireOnce, fireOnceActivityMap, fireOnceOptionsOf } from './worker/fire-once';
export type {
  FireOnceOptions,
  ValueFireOnceOptions,
  InFlightPolicy,
  LockMode,
  ConflictPolicy,
  ExternalArtifact,
  ArtifactIds,
} from './worker/activity-options';
export { fireOnceContext } from './worker/context';
export { METRICS } from './worker/observe';
export type { FireOnceContext } from './worker/context';
export { createFireOnceActivityInterceptor } from './worker/interceptor';
export type { FireOnceInterceptorConfig } from './worker/interceptor';
export { toApplicationFailure, MAX_IN_FLIGHT_RETRY_DELAY_MS } from './worker/failures';
export { SCOPE_HEADER } from './common/header';
