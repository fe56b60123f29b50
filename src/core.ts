/**
 * temporal-fire-once/core: building blocks for workers wired by hand and for tools that read the
 * guard's keys — the key layout and stored records of protocol v3, the Lua scripts, the wait and
 * wake machinery, the dispatch log, the local artifact cache, and the Temporal interceptor
 * without the plugin.
 *
 * Stability: less settled than the package root. A name here may change in a minor release,
 * and each such change is listed in the release notes; the protocol itself (keys, records,
 * scripts) changes only with its version (PROTOCOL.md).
 *
 * @packageDocumentation
 */

// Keys, records, scripts: protocol v3.
export { FireOnceKeys, MAX_ID_BYTES, PROTOCOL_VERSION, DEFAULT_NAMESPACE, encodeId, decodeId } from './core/keys';
export type { IdKind, ParsedKey, ScopeKeyKind } from './core/keys';
export { formatArtifact, formatWaiter, parseArtifact, parseLock, parseWaiter } from './core/records';
export type { ArtifactRecord, LockRecord, WaiterEntry } from './core/records';
export { ACQUIRE_REPLY, COMMIT_REFUSED, PARK_REPLY, PROTOCOL_SCRIPTS, REAP_REPLY, SCRIPTS_DIR } from './core/scripts';
export type { LuaScript, RedisClient } from './core/scripts';
export { claimProtocol } from './core/protocol';
export { SAFE_EVICTION_POLICY, checkEvictionPolicy, readEvictionPolicies } from './core/deployment/eviction';
export type { EvictionCheckOptions, EvictionPolicy } from './core/deployment/eviction';
export { checkWorkerRedis } from './core/deployment/worker-check';

// The core guard's parts.
export { WAITERS_GRACE_MS } from './core/guard';
export { holderId } from './core/outcomes';
export type { AcquireOptions, CommitOptions, Committed, Settled } from './core/outcomes';
export { GUARD_DEFAULTS } from './core/options';
export type { ResolvedGuardOptions } from './core/options';
export type { FireOnceErrorContext } from './core/errors';
export { FireOnceWorkerShutdown } from './core/errors';
export { ParkingLot } from './core/parking';
export type { ParkOutcome, ParkingSpot, ReapOutcome } from './core/parking';
export { waitForTurn } from './core/wait';
export type { TurnOutcome, WaitOptions } from './core/wait';
export { WakeHub } from './core/wake';
export { startRenewal } from './core/renewal';
export type { Renewal } from './core/renewal';
export { ArtifactCache, ARTIFACT_CACHE_DEFAULTS } from './core/artifact-cache';
export type { ArtifactCacheOptions } from './core/artifact-cache';
export { DispatchLog, EVENT_FIELDS, parseEvent } from './core/dispatch-log';
export type { Decision, DispatchEvent } from './core/dispatch-log';

// The Temporal adapter, wired by hand.
export { createFireOnceActivityInterceptor } from './worker/interceptor';
export type { FireOnceInterceptorConfig } from './worker/interceptor';
export { workflowInterceptorModules } from './worker/plugin';
export { fireOnceActivityMap, fireOnceOptionsOf } from './worker/fire-once';
export type { ActivityDefaultOptions, DefaultInFlightPolicy, InFlightPolicy, LockMode, ResolvedPluginOptions } from './worker/options';
export type { ArtifactIds, ConflictPolicy, ExternalArtifact, ValueFireOnceOptions } from './worker/activity-options';
export { toApplicationFailure } from './worker/failures';
export { ParkedWatch } from './worker/parked-watch';
export { METRICS } from './worker/observe';
export { SCOPE_HEADER } from './common/header';
