import { FireOnceConfigError } from '../core/errors';
import { GUARD_DEFAULTS, checkDuration, describe, resolveGuardOptions, type FireOnceGuardOptions, type ResolvedGuardOptions } from '../core/options';
import type { InFlightPolicy } from './activity-options';

/**
 * Options of {@link FireOncePlugin}: the guard's options plus the worker-wide in-flight policy.
 */
export interface FireOncePluginOptions extends FireOnceGuardOptions {
  /**
   * What a guarded activity does while another invocation holds the lock, unless the activity
   * sets its own.
   * @defaultValue `'wait'`
   */
  readonly onInFlight?: InFlightPolicy;
  /**
   * With `'wait'`: how often a waiter re-checks for the artifact or a released lock.
   * @defaultValue `250`
   */
  readonly pollIntervalMs?: number;
}

/** Plugin options with every default filled in. */
export type ResolvedPluginOptions = ResolvedGuardOptions & Required<Pick<FireOncePluginOptions, 'onInFlight' | 'pollIntervalMs'>>;

/**
 * Every default of the plugin, frozen.
 *
 * @example
 * ```ts
 * import { FIRE_ONCE_DEFAULTS } from 'temporal-fire-once';
 * console.log(FIRE_ONCE_DEFAULTS.lockTtlMs); // 900000
 * ```
 */
export const FIRE_ONCE_DEFAULTS = Object.freeze({
  ...GUARD_DEFAULTS,
  onInFlight: 'wait',
  pollIntervalMs: 250,
} as const);

/** Check every plugin option and fill in defaults; throws `FireOnceConfigError` naming the field. */
export function resolvePluginOptions(options: FireOncePluginOptions): ResolvedPluginOptions {
  const guard = resolveGuardOptions(options, ['onInFlight', 'pollIntervalMs']);
  const onInFlight = options.onInFlight ?? FIRE_ONCE_DEFAULTS.onInFlight;
  if (!['wait', 'fail', 'skip'].includes(onInFlight)) {
    throw new FireOnceConfigError(`onInFlight must be one of wait, fail, skip (got ${describe(onInFlight)})`);
  }
  return {
    ...guard,
    onInFlight,
    pollIntervalMs: checkDuration('pollIntervalMs', options.pollIntervalMs ?? FIRE_ONCE_DEFAULTS.pollIntervalMs, 60_000),
  };
}
