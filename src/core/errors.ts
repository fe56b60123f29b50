import { WORKER_SHUTDOWN_TYPE } from '../common/hand-off';

/**
 * Give an error class its stable `type` string, its `retryable` flag, its `name`, and an
 * `instanceof` that works by a registered symbol rather than by prototype identity, so that it
 * holds across duplicated copies of this module (jest's module registry, two bundles), the way
 * Temporal's own errors do. Each class states its type here, once.
 */
function defineErrorType(cls: abstract new (...args: never[]) => FireOnceError, type: string, retryable: boolean): void {
  const marker = Symbol.for(`temporal-fire-once.is${type}`);
  Object.defineProperty(cls.prototype, marker, { value: true });
  Object.defineProperty(cls.prototype, 'name', { value: type, enumerable: true });
  Object.defineProperty(cls.prototype, 'type', { value: type, enumerable: true });
  Object.defineProperty(cls.prototype, 'retryable', { value: retryable, enumerable: true });
  Object.defineProperty(cls, Symbol.hasInstance, {
    value: (value: unknown) => typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[marker] === true,
  });
}

/**
 * What a guard error is about. Every field is optional because not every error has every one;
 * none of them ever carries an argument or result payload.
 */
export interface FireOnceErrorContext {
  /** The Redis key the error concerns. */
  readonly key?: string;
  /** The dispatch scope (session or job ID). */
  readonly scope?: string;
  /** The step whose lock is concerned. */
  readonly step?: string;
  /** The job type whose artifact is concerned. */
  readonly jobType?: string;
  /** A short, non-secret hash of the lock token of the holder concerned. */
  readonly holder?: string;
  /** The activity type, when the error arose inside a Temporal activity. */
  readonly activityType?: string;
}

/**
 * Base class of every error the guard throws. `type` is the stable string that the Temporal
 * adapter puts into `ApplicationFailure.type`; `retryable` is how the adapter maps it.
 *
 * `instanceof` is symbol based, so it holds across duplicated module copies (jest, bundlers).
 *
 * @example
 * ```ts
 * import { FireOnceError, FireOnceInFlight } from 'temporal-fire-once';
 * const err: unknown = new FireOnceInFlight('busy', 1000, { scope: 's', step: 'dispatch' });
 * if (err instanceof FireOnceError) console.log(err.type, err.retryable, err.context.scope);
 * ```
 */
export class FireOnceError extends Error {
  /** Stable failure type string, documented in the README. */
  declare readonly type: string;
  /** Whether Temporal should retry the activity when this error ends it. */
  declare readonly retryable: boolean;
  /** Keys and IDs the error concerns; never payloads. */
  readonly context: FireOnceErrorContext;

  constructor(message: string, context: FireOnceErrorContext = {}, options?: { cause?: unknown }) {
    super(message, options);
    this.context = context;
  }
}
defineErrorType(FireOnceError, 'FireOnceError', false);

/**
 * Options given to the plugin, the guard or `fireOnce()` are invalid. Thrown at construction,
 * before anything runs.
 *
 * @example
 * ```ts
 * import { FireOnceConfigError, FireOnceGuard } from 'temporal-fire-once';
 * import { Redis } from 'ioredis';
 * try {
 *   new FireOnceGuard({ redis: new Redis({ lazyConnect: true }), lockTtlMs: -5 });
 * } catch (err) {
 *   if (err instanceof FireOnceConfigError) console.log(err.message); // lockTtlMs must be a positive integer (got -5)
 * }
 * ```
 */
export class FireOnceConfigError extends FireOnceError {}
defineErrorType(FireOnceConfigError, 'FireOnceConfigError', false);

/**
 * A guarded activity ran with no scope: neither `options.scope` nor `setDispatchScope()` gave one.
 * Not retryable; nothing was dispatched.
 *
 * @example
 * ```ts
 * import { FireOnceMissingScope } from 'temporal-fire-once';
 * new FireOnceMissingScope('activity "send" has no dispatch scope', { activityType: 'send' }).type; // 'FireOnceMissingScope'
 * ```
 */
export class FireOnceMissingScope extends FireOnceError {}
defineErrorType(FireOnceMissingScope, 'FireOnceMissingScope', false);

/**
 * A scope, step or job type is not a usable ID (empty, whitespace only, too long, or not
 * well-formed Unicode). Not retryable; nothing was dispatched.
 *
 * @example
 * ```ts
 * import { FireOnceInvalidId } from 'temporal-fire-once';
 * import { encodeId } from 'temporal-fire-once/core';
 * try {
 *   encodeId('scope', '   ');
 * } catch (err) {
 *   if (err instanceof FireOnceInvalidId) console.log(err.message); // scope must not be empty or whitespace only ...
 * }
 * ```
 */
export class FireOnceInvalidId extends FireOnceError {}
defineErrorType(FireOnceInvalidId, 'FireOnceInvalidId', false);

/**
 * Another invocation holds the fire-once lock and the in-flight policy gave up waiting (or is
 * `'fail'`). Retryable: `retryAfterMs` is when to try again, in ms: for `'fail'`, half the time the
 * holder has run so far, at most the lock's TTL left.
 *
 * @example
 * ```ts
 * import { FireOnceInFlight } from 'temporal-fire-once';
 * const err = new FireOnceInFlight('step "send" is in flight', 2_000, { scope: 's', step: 'send' });
 * err.retryable; // true
 * err.retryAfterMs; // 2000
 * ```
 */
export class FireOnceInFlight extends FireOnceError {
  /** When to try again, in ms; the activity's `nextRetryDelay`. */
  readonly retryAfterMs: number;

  constructor(message: string, retryAfterMs: number, context: FireOnceErrorContext = {}) {
    super(message, context);
    this.retryAfterMs = retryAfterMs;
  }
}
defineErrorType(FireOnceInFlight, 'FireOnceInFlight', true);

/**
 * Redis could not be reached or answered with an error. The guard fails closed: nothing was
 * dispatched by this attempt. Retryable.
 *
 * @example
 * ```ts
 * import { FireOnceGuard, FireOnceStoreUnavailable } from 'temporal-fire-once';
 * import { Redis } from 'ioredis';
 *
 * export async function tryAcquire(redis: Redis) {
 *   try {
 *     return await new FireOnceGuard({ redis }).acquire({ scope: 's', step: 'send', jobType: 'send' });
 *   } catch (err) {
 *     if (err instanceof FireOnceStoreUnavailable) return undefined; // fail closed: do not dispatch
 *     throw err;
 *   }
 * }
 * ```
 */
export class FireOnceStoreUnavailable extends FireOnceError {
  /**
   * When Redis did not answer in time: the call itself, which ioredis may still run once Redis
   * is back. It settles with the call's reply, so a caller can report what really happened.
   */
  readonly late?: Promise<unknown>;

  constructor(message: string, context: FireOnceErrorContext = {}, options: { cause?: unknown; late?: Promise<unknown> } = {}) {
    super(message, context, options.cause === undefined ? undefined : { cause: options.cause });
    if (options.late !== undefined) this.late = options.late;
  }
}
defineErrorType(FireOnceStoreUnavailable, 'FireOnceStoreUnavailable', true);

/**
 * Redis answered something this protocol never sends or stores: a script reply it does not know,
 * or a lock value it cannot read. Not retryable: it means another program (or another version of
 * this library) writes the same keys; `fire-once doctor` helps find which.
 *
 * @example
 * ```ts
 * import { FireOnceProtocolError } from 'temporal-fire-once';
 * new FireOnceProtocolError('unexpected reply from fireOnceAcquireV3: 9').retryable; // false
 * ```
 */
export class FireOnceProtocolError extends FireOnceError {}
defineErrorType(FireOnceProtocolError, 'FireOnceProtocolError', false);

/**
 * A stored artifact is not a valid payload. Not retryable: retrying would read the same bytes.
 * Nothing is dispatched; remove the artifact (or let it expire) to run the job again.
 *
 * @example
 * ```ts
 * import { FireOnceCorruptArtifact } from 'temporal-fire-once';
 * new FireOnceCorruptArtifact('stored artifact is not a valid payload', { key: 'fire-once:v3:{default/s}:a:j' }).retryable; // false
 * ```
 */
export class FireOnceCorruptArtifact extends FireOnceError {}
defineErrorType(FireOnceCorruptArtifact, 'FireOnceCorruptArtifact', false);

/**
 * The activity succeeded (its job was dispatched) but its result could not be stored as an
 * artifact. The lock is kept until its TTL so that no retry dispatches the job again.
 * Not retryable.
 *
 * @example
 * ```ts
 * import { FireOnceUnstorableResult } from 'temporal-fire-once';
 * new FireOnceUnstorableResult('the result cannot be serialised').type; // 'FireOnceUnstorableResult'
 * ```
 */
export class FireOnceUnstorableResult extends FireOnceError {}
defineErrorType(FireOnceUnstorableResult, 'FireOnceUnstorableResult', false);

/**
 * Same scope and step, different arguments: a later call does not match the call that holds the
 * lock or produced the artifact (Stripe's `idempotency_error`). Not retryable; nothing was
 * dispatched. Set `onConflict: 'ignore'` to let such calls share the first call's outcome.
 *
 * @example
 * ```ts
 * import { FireOnceKeyConflict } from 'temporal-fire-once';
 * const err: unknown = new FireOnceKeyConflict('other arguments', { scope: 's', step: 'send' });
 * if (err instanceof FireOnceKeyConflict) console.log(err.context.step); // 'send'
 * ```
 */
export class FireOnceKeyConflict extends FireOnceError {}
defineErrorType(FireOnceKeyConflict, 'FireOnceKeyConflict', false);

/**
 * A lease renewal found the lock gone or held by another token: this holder no longer owns the
 * dispatch. The activity's `fireOnceContext().signal` is aborted with this error. Retryable: the
 * next attempt finds the new holder's lock or artifact.
 *
 * @example
 * ```ts
 * import { FireOnceLockLost, fireOnce, fireOnceContext } from 'temporal-fire-once';
 *
 * export const upload = fireOnce(async (): Promise<void> => {
 *   const { signal } = fireOnceContext();
 *   signal.addEventListener('abort', () => {
 *     if (signal.reason instanceof FireOnceLockLost) console.warn('another holder took over');
 *   });
 * });
 * ```
 */
export class FireOnceLockLost extends FireOnceError {}
defineErrorType(FireOnceLockLost, 'FireOnceLockLost', true);

/**
 * A result is larger than `maxArtifactBytes`. Logged, not thrown: the result still reaches the
 * workflow, no artifact is stored, and the lock is kept until its TTL.
 *
 * @example
 * ```ts
 * import { FireOnceArtifactTooLarge } from 'temporal-fire-once';
 * new FireOnceArtifactTooLarge('artifact of 2000000 bytes exceeds maxArtifactBytes').type; // 'FireOnceArtifactTooLarge'
 * ```
 */
export class FireOnceArtifactTooLarge extends FireOnceError {}
defineErrorType(FireOnceArtifactTooLarge, 'FireOnceArtifactTooLarge', false);

/**
 * A guarded local activity was waiting in its slot for another worker's job when its own worker
 * began to shut down. The SDK never cancels a local activity at shutdown, and the worker cannot
 * stop before the workflow task that waits on it completes, so the wait ends with this
 * non-retryable failure; the plugin's workflow interceptor, which asked for it in the activity's
 * header, schedules the same attempt again behind a short timer, and the workflow's next worker
 * runs it. Workflow code never sees it. Not retryable: a retry would run on the stopping worker.
 *
 * @example
 * ```ts
 * import { FireOnceWorkerShutdown } from 'temporal-fire-once/core';
 * new FireOnceWorkerShutdown('worker shutting down').retryable; // false
 * ```
 */
export class FireOnceWorkerShutdown extends FireOnceError {}
defineErrorType(FireOnceWorkerShutdown, WORKER_SHUTDOWN_TYPE, false);

/** A printable rendering of a bad option value. */
export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'function') return 'a function';
  if (value !== null && typeof value === 'object') return 'an object';
  return String(value);
}
