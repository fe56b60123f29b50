import { Context } from '@temporalio/activity';
import { FireOnceConfigError } from '../core/errors';

/** What a guarded activity can know about its own dispatch. */
export interface FireOnceContext {
  readonly scope: string;
  readonly step: string;
  readonly jobType: string;
  /** The lock key this call holds. */
  readonly lockKey: string;
  /**
   * Strictly greater than every earlier holder's of this `(scope, step)`. Send it with each
   * write to a downstream system and have that system reject writes with a lower token than it
   * has seen: a paused holder whose lease expired is then refused, whatever it believes.
   */
  readonly fencingToken: number;
  /** Aborted with `FireOnceLockLost` when a lease renewal finds the lock lost. */
  readonly signal: AbortSignal;
  /**
   * Renew the lease now (e.g. next to a heartbeat); resolves `false` if the lock is lost. In
   * `'fixed'` mode, which renews nothing on its own, it sets the lock's TTL back to `lockTtlMs`
   * (rejecting with `FireOnceStoreUnavailable` if Redis does not answer, or `FireOnceProtocolError`
   * if the lock key holds data of another type).
   */
  renew(): Promise<boolean>;
}

/**
 * The fire-once context of each activity that is dispatching, by its Temporal activity `Context`,
 * which Temporal's own AsyncLocalStorage already carries through the activity's async calls. A
 * second AsyncLocalStorage of ours would add a propagation step to every promise the worker
 * creates, guarded or not (bench/RESULTS.md, issue 11).
 */
const contexts = new WeakMap<object, FireOnceContext>();

/** Run `fn`, the activity of `activity`, with `context` as its fire-once context until it settles. */
export async function runWithFireOnceContext<T>(activity: object, context: FireOnceContext, fn: () => Promise<T>): Promise<T> {
  contexts.set(activity, context);
  try {
    return await fn();
  } finally {
    contexts.delete(activity);
  }
}

/** The Temporal activity context of the running activity, or `undefined` outside one. */
export function currentActivityContext(): Context | undefined {
  try {
    return Context.current();
  } catch {
    return undefined;
  }
}

/**
 * The fire-once context of the guarded activity that is running: its fencing token, lease
 * signal and keys. Throws `FireOnceConfigError` outside a guarded activity's dispatch.
 *
 * @example
 * ```ts
 * import { fireOnce, fireOnceContext } from 'temporal-fire-once';
 *
 * export const publish = fireOnce(async (doc: string): Promise<void> => {
 *   const { fencingToken, signal } = fireOnceContext();
 *   await fetch('https://store.example/docs', { method: 'PUT', body: doc, signal, headers: { 'fencing-token': String(fencingToken) } });
 * });
 * ```
 */
export function fireOnceContext(): FireOnceContext {
  const activity = currentActivityContext();
  const context = activity === undefined ? undefined : contexts.get(activity);
  if (context === undefined) throw new FireOnceConfigError('fireOnceContext() is only available inside a guarded activity while it dispatches');
  return context;
}
