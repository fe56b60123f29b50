import type { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { ApplicationFailure, ensureApplicationFailure, type PayloadCodec, type PayloadConverter } from '@temporalio/common';
import { FireOnceError } from '../core/errors';
import { differs } from '../core/target';
import type { ParkingSpot, ReapOutcome } from '../core/parking';
import { parseWaiter } from '../core/records';
import { converterFailure, decodeArtifact, encodeArtifact, resultOf } from './artifact';
import { toApplicationFailure } from './failures';

/** The retry delay a handed-over waiter is failed with: as good as none, so one of them acquires at once. */
const PARKED_RETRY_DELAY_MS = 1;

type Logger = Context['log'];

/** What a worker needs to complete or fail task tokens: the client, and how results are encoded. */
export interface Completer {
  readonly client: Client;
  readonly log: Logger;
  readonly payloadConverter: PayloadConverter;
  readonly payloadCodecs: readonly PayloadCodec[];
}

/**
 * Complete handed-over waiters with `payload`, the result as the worker's payload converter made
 * it (before the codecs): the client applies the worker's codecs, exactly as to a normal result.
 * `undefined` (external mode) completes them with no result. A waiter that is gone (its workflow
 * cancelled or terminated, its attempt timed out) is logged and skipped.
 */
export async function completeWaiters(
  completer: Completer,
  waiters: readonly Uint8Array[],
  payload: Parameters<typeof resultOf>[0] | undefined,
): Promise<void> {
  if (waiters.length === 0) return;
  if (payload !== undefined && completer.payloadCodecs.length > 0) {
    try {
      await encodeArtifact(payload, completer.payloadCodecs); // what the client will run on each completion
    } catch (err) {
      // Temporal fails the holder's own attempt with the codecs' error, retryably, as its
      // completion runs them too: the waiters fail with it rather than wait out their timeouts.
      completer.log.warn('fire-once: the payload codec refused the result for parked waiters; failing them with its error, as the holder fails', {
        error: (err as Error).message,
      });
      await failWaitersWith(completer, waiters, failureOf(err));
      return;
    }
  }
  let result: unknown;
  try {
    result = payload === undefined ? undefined : resultOf(payload, completer.payloadConverter);
  } catch (err) {
    // A converter that cannot read back what it made fails the holder's own attempt too (it
    // returns the same value), retryably. Named by its class only: its message may quote the value.
    const type = converterFailure(err);
    completer.log.warn('fire-once: the payload converter cannot read back the result for parked waiters; failing them so they retry', { error: type });
    const message = `the payload converter could not read back the result (${type})`;
    await failWaitersWith(completer, waiters, ApplicationFailure.create({ type, message, nonRetryable: false }));
    return;
  }
  await Promise.all(waiters.map((token) => completer.client.activity.complete(token, result).catch((err: unknown) => gone(completer, 'complete', err))));
}

/** Fail handed-over waiters with a retryable `FireOnceInFlight` and no retry delay, so that one of them acquires. */
export async function failWaiters(completer: Completer, waiters: readonly Uint8Array[], why: string): Promise<void> {
  const failure = ApplicationFailure.create({ type: 'FireOnceInFlight', message: why, nonRetryable: false, nextRetryDelay: PARKED_RETRY_DELAY_MS });
  await failWaitersWith(completer, waiters, failure);
}

/** Fail handed-over waiters with `failure` as it is: the holder's own non-retryable error, say. */
export async function failWaitersWith(completer: Completer, waiters: readonly Uint8Array[], failure: ApplicationFailure): Promise<void> {
  await Promise.all(waiters.map((token) => completer.client.activity.fail(token, failure).catch((err: unknown) => gone(completer, 'fail', err))));
}

/**
 * Hand the waiters of `entries` (a list's entries, PROTOCOL.md §7) an outcome of a dispatch called
 * with `argsHash`: `settle` gets the task tokens of those parked with the same arguments (or with
 * none checked). Those parked with other arguments are failed so that they retry: the outcome is
 * not theirs (a holder that took the step over after their lock ended was called so), and their
 * retry decides for itself (`FireOnceKeyConflict` on the result, unless they ignore conflicts).
 */
export async function settleWaiters(
  completer: Completer,
  entries: readonly Buffer[],
  argsHash: string,
  step: string,
  settle: (tokens: readonly Buffer[]) => Promise<void>,
): Promise<void> {
  const same: Buffer[] = [];
  const other: Buffer[] = [];
  for (const entry of entries) {
    const waiter = parseWaiter(entry);
    (differs(argsHash, waiter.argsHash) ? other : same).push(waiter.token);
  }
  if (other.length > 0) completer.log.warn('fire-once: parked waiters of other arguments than the dispatch that settled; failing them so they retry', { step });
  await Promise.all([
    failWaiters(completer, other, `step ${JSON.stringify(step)} was dispatched with other arguments than this call's; retry`),
    same.length > 0 ? settle(same) : undefined,
  ]);
}

/** Complete or fail the waiters a reap took, as its outcome says. */
export async function handOverReaped(completer: Completer, spot: ParkingSpot, outcome: ReapOutcome): Promise<void> {
  if (outcome.kind === 'held') return;
  const { step } = spot.target;
  if (outcome.kind === 'free') {
    if (outcome.waiters.length > 0)
      completer.log.warn('fire-once: the lock of parked waiters vanished without a commit (holder lost); failing them so they retry', logOf(spot));
    const tokens = outcome.waiters.map((entry) => parseWaiter(entry).token);
    await failWaiters(completer, tokens, `the dispatch of step ${JSON.stringify(step)} ended without a result; retry`);
    return;
  }
  await settleWaiters(completer, outcome.waiters, outcome.argsHash, step, async (tokens) => {
    try {
      const payload = spot.mode === 'x' ? undefined : await decodeArtifact(outcome.artifact, completer.payloadCodecs, logOf(spot));
      await completeWaiters(completer, tokens, payload);
    } catch (err) {
      // This worker cannot read the stored result (another codec, another converter): a
      // fast-forward to it fails the same way, so the waiters fail now, not at their timeouts.
      completer.log.error('fire-once: parked waiters cannot be completed with the stored result; failing them', {
        ...logOf(spot),
        error: (err as Error).message,
      });
      await failWaitersWith(completer, tokens, failureOf(err));
    }
  });
}

/** The failure a waiter gets for `err`, as its own fast-forward would end with it. */
function failureOf(err: unknown): ApplicationFailure {
  return err instanceof FireOnceError ? toApplicationFailure(err) : ensureApplicationFailure(err);
}

/**
 * A completion, failure or heartbeat of a parked waiter did not go through. Temporal answers
 * NOT_FOUND for a waiter that is gone (cancelled, terminated, timed out): nothing to do. Anything
 * else (Temporal unreachable past the client's retries) leaves the waiter to its heartbeat or
 * start-to-close timeout, and its retry checks the guard again (fast-forward, park or acquire).
 */
export function gone({ log }: Completer, what: string, err: unknown): void {
  const error = (err as Error | undefined)?.message ?? String(err);
  if ((err as Error | undefined)?.name === 'ActivityNotFoundError') {
    log.debug(`fire-once: could not ${what} a parked waiter (gone: cancelled, terminated or timed out)`, { error });
    return;
  }
  log.warn(`fire-once: could not ${what} a parked waiter; its heartbeat or start-to-close timeout will end it, and its retry checks again`, { error });
}

/** What every log line about the waiters of one `(scope, step)` carries. */
export function logOf(spot: ParkingSpot): Record<string, string> {
  return { key: spot.waitersKey, scope: spot.target.scope, step: spot.target.step, jobType: spot.target.jobType };
}

/**
 * A heartbeat of a parked waiter failed with `err`: end the waiter as the worker ends a running
 * activity of its own, and resolve whether its attempt is over (no longer to watch). Not found:
 * it ended. Cancellation requested: report it, so a workflow waiting for it is not kept waiting.
 * Paused or reset (`temporal activity pause`/`reset`): fail the attempt, so Temporal retries it
 * when unpaused, or at once. Anything else is Temporal not answering: `false`, beat again.
 */
export function endedByBeat(completer: Completer, token: Uint8Array, err: unknown): boolean {
  const name = (err as Error | undefined)?.name ?? '';
  const ended = PAUSED_OR_RESET.get(name);
  if (name === 'ActivityNotFoundError') gone(completer, 'heartbeat', err);
  else if (name === 'ActivityCancelledError')
    completer.client.activity.reportCancellation(token).catch((e: unknown) => gone(completer, 'report the cancellation of', e));
  else if (ended !== undefined) completer.client.activity.fail(token, new ApplicationFailure(...ended)).catch((e: unknown) => gone(completer, 'fail', e));
  else return false;
  return true;
}

/** What the worker fails its own running activity with when Temporal says it was paused or reset. */
const PAUSED_OR_RESET = new Map<string, [message: string, type: string]>([
  ['ActivityPausedError', ['Activity paused', 'ActivityPause']],
  ['ActivityResetError', ['Activity reset', 'ActivityReset']],
]);
