import { AsyncLocalStorage } from 'node:async_hooks';
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
  /** Renew the lease now (e.g. next to a heartbeat); resolves `false` if the lock is lost. */
  renew(): Promise<boolean>;
}

const storage = new AsyncLocalStorage<FireOnceContext>();

/** Run `fn` with `context` as the current fire-once context. */
export function runWithFireOnceContext<T>(context: FireOnceContext, fn: () => T): T {
  return storage.run(context, fn);
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
  const context = storage.getStore();
  if (context === undefined) throw new FireOnceConfigError('fireOnceContext() is only available inside a guarded activity while it dispatches');
  return context;
}
