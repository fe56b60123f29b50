import { ApplicationFailure } from '@temporalio/common';
import { FireOnceInFlight, type FireOnceError } from '../core/errors';

const MIN_IN_FLIGHT_RETRY_DELAY_MS = 100;

/**
 * Map a guard error to the `ApplicationFailure` that ends the activity: `type` is the error's
 * stable type string, `nonRetryable` the inverse of its `retryable`, and the details carry its
 * key context (never a payload). A `FireOnceInFlight` asks for its `retryAfterMs` (at least 100 ms)
 * as `nextRetryDelay`.
 *
 * @example
 * ```ts
 * import { FireOnceInFlight } from 'temporal-fire-once';
 * import { toApplicationFailure } from 'temporal-fire-once/core';
 * const failure = toApplicationFailure(new FireOnceInFlight('busy', 30_000));
 * failure.type; // 'FireOnceInFlight'
 * failure.nextRetryDelay; // 30000: its retryAfterMs
 * ```
 */
export function toApplicationFailure(err: FireOnceError, extraContext: Readonly<Record<string, string | number>> = {}): ApplicationFailure {
  const nextRetryDelay = err instanceof FireOnceInFlight ? Math.max(err.retryAfterMs, MIN_IN_FLIGHT_RETRY_DELAY_MS) : undefined;
  return ApplicationFailure.create({
    type: err.type,
    message: err.message,
    nonRetryable: !err.retryable,
    details: [{ ...extraContext, ...err.context }],
    cause: err.cause instanceof Error ? err.cause : undefined,
    ...(nextRetryDelay === undefined ? {} : { nextRetryDelay }),
  });
}
