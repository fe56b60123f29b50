import { ApplicationFailure } from '@temporalio/common';
import { FireOnceInFlight, type FireOnceError } from '../core/errors';

/**
 * The longest `nextRetryDelay` a `FireOnceInFlight` asks for, whatever the lock's TTL.
 *
 * @example
 * ```ts
 * import { MAX_IN_FLIGHT_RETRY_DELAY_MS } from 'temporal-fire-once/core';
 * MAX_IN_FLIGHT_RETRY_DELAY_MS; // 10000
 * ```
 */
export const MAX_IN_FLIGHT_RETRY_DELAY_MS = 10_000;
const MIN_IN_FLIGHT_RETRY_DELAY_MS = 100;

/**
 * Map a guard error to the `ApplicationFailure` that ends the activity: `type` is the error's
 * stable type string, `nonRetryable` the inverse of its `retryable`, and the details carry its
 * key context (never a payload).
 *
 * @example
 * ```ts
 * import { FireOnceInFlight } from 'temporal-fire-once';
 * import { toApplicationFailure } from 'temporal-fire-once/core';
 * const failure = toApplicationFailure(new FireOnceInFlight('busy', 30_000));
 * failure.type; // 'FireOnceInFlight'
 * failure.nextRetryDelay; // 10000: capped
 * ```
 */
export function toApplicationFailure(err: FireOnceError, extraContext: Record<string, string> = {}): ApplicationFailure {
  const nextRetryDelay =
    err instanceof FireOnceInFlight ? Math.min(Math.max(err.retryAfterMs, MIN_IN_FLIGHT_RETRY_DELAY_MS), MAX_IN_FLIGHT_RETRY_DELAY_MS) : undefined;
  return ApplicationFailure.create({
    type: err.type,
    message: err.message,
    nonRetryable: !err.retryable,
    details: [{ ...extraContext, ...err.context }],
    cause: err.cause instanceof Error ? err.cause : undefined,
    ...(nextRetryDelay === undefined ? {} : { nextRetryDelay }),
  });
}
