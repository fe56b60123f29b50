import { AsyncResource } from 'node:async_hooks';
import { FireOnceError, FireOnceStoreUnavailable } from '../core/errors';
import { WAITERS_GRACE_MS } from '../core/guard';
import type { ParkingLot, ParkingSpot, ReapOutcome } from '../core/parking';
import { parseWaiter } from '../core/records';
import { MAX_DURATION_MS, MAX_TIMER_MS, positiveInteger } from '../core/options';
import { atMost } from '../core/store-calls';
import { toApplicationFailure } from './failures';
import { endedByBeat, failWaiters, failWaitersWith, gone, handOverReaped, logOf, type Completer } from './hand-over';

/**
 * The longest time between two reaps of one worker. A waiter list lives the lock's PTTL plus
 * {@link WAITERS_GRACE_MS}, so the worker must reap within the grace of the lock ending: to fail
 * its waiters if the lock vanished, or to stretch their list over the lock of a holder who took
 * over. Reaps come at most this plus one tick apart (the tick is never longer), half the grace.
 */
export const MAX_REAP_EVERY_MS = WAITERS_GRACE_MS / 4;

/**
 * How long a worker keeps watching a waiter it parked after its lock ended without it on the list.
 * Whoever committed or released took the list: it completed or failed the waiter, or, when it
 * cannot (a Python holder, a holder without a client or of another Temporal namespace), it puts the
 * entry back for this worker's reap, a round trip later. A reap can land in between: it keeps
 * looking until a reap this long after, instead of leaving a waiter put back to its timeouts.
 */
export const HAND_BACK_WINDOW_MS = 1_000;

interface Parked {
  readonly token: Uint8Array;
  /** The worker that parked it (one of the several that may share this watch): its heartbeats go through that worker's client. */
  readonly completer: Completer;
  readonly heartbeatMs: number | undefined;
  /** The activity's heartbeat details when it parked, which each heartbeat passes on. */
  readonly details: unknown;
  nextBeat: number;
  /** Its last heartbeat failed (logged once until one goes through). */
  beatFailing?: boolean;
  /** When a reap first found its lock ended and it not on the list (see {@link HAND_BACK_WINDOW_MS}). */
  missingSince?: number;
}

interface Watched {
  readonly spot: ParkingSpot;
  /** The reap hands the list over through this: the last worker that parked here and has not stopped ({@link ParkedWatch.close}). */
  completer: Completer;
  readonly parked: Map<string, Parked>;
  busy: boolean;
}

/**
 * The waiters one worker parked, watched until someone hands them over. Every `reapEveryMs` (at
 * most {@link MAX_REAP_EVERY_MS}) it asks Redis, per parked `(scope, step)`, whether the lock
 * ended without a commit or release handing them over ({@link ParkingLot.reap}): the holder died
 * and its lease expired (fail them so that they retry), or the job wrote its own artifact
 * (external mode: complete them). While the lock stands, the reap stretches their list over it,
 * whoever holds it now. It also heartbeats each parked waiter whose activity has a heartbeat
 * timeout, so that the timeout bounds it only if this worker dies.
 *
 * @example
 * ```ts
 * import { FireOnceGuard, fireOnce } from 'temporal-fire-once';
 * import { ParkedWatch, ParkingLot, createFireOnceActivityInterceptor, fireOnceActivityMap } from 'temporal-fire-once/core';
 * import { Redis } from 'ioredis';
 *
 * const guard = new FireOnceGuard({ redis: new Redis({ lazyConnect: true }) });
 * const parkedWatch = new ParkedWatch(new ParkingLot(guard), 250);
 * const activities = { summarise: fireOnce(async (id: string) => `summary of ${id}`) };
 * const factory = createFireOnceActivityInterceptor({ guard, activities: fireOnceActivityMap(activities), parkedWatch });
 * export async function afterTheWorkerStopped(): Promise<void> {
 *   // The worker ran with `factory` and has stopped: fail the waiters it still watches so that
 *   // they retry on a worker that runs, before the worker's connection is closed.
 *   await parkedWatch.close();
 * }
 * void factory;
 * ```
 */
export class ParkedWatch {
  private readonly watched = new Map<string, Watched>();
  private timer: NodeJS.Timeout | undefined;
  /** The timer's period: `reapEveryMs`, or a parked waiter's heartbeat period if that is shorter. */
  private tickMs = Infinity;
  private nextReap = 0;
  // The context this watch was made in (the worker's, not an activity's). The worker ties client
  // calls made inside an activity to that activity's abort signal; a waiter that parked, or a
  // holder that was cancelled, must not take its hand-overs and heartbeats down with it.
  private readonly outside = new AsyncResource('fire-once-parked');

  private readonly reapEveryMs: number;

  constructor(
    private readonly lot: ParkingLot,
    reapEveryMs: number,
  ) {
    // A period that is no positive integer would make its timer fire every millisecond (NaN, 0).
    positiveInteger('ms', MAX_DURATION_MS)('ParkedWatch: reapEveryMs', reapEveryMs);
    this.reapEveryMs = Math.min(reapEveryMs, MAX_REAP_EVERY_MS);
  }

  /**
   * Watch one parked task token. `details` are its activity's heartbeat details as the attempt
   * found them: each heartbeat replaces them in Temporal, so each carries them unchanged.
   */
  watch(spot: ParkingSpot, completer: Completer, token: Uint8Array, heartbeatMs: number | undefined, details?: unknown): void {
    let entry = this.watched.get(spot.waitersKey);
    if (entry === undefined) {
      entry = { spot, completer, parked: new Map(), busy: false };
      this.watched.set(spot.waitersKey, entry);
    }
    entry.completer = completer;
    entry.parked.set(Buffer.from(token).toString('base64'), { token, completer, heartbeatMs, details, nextBeat: Date.now() + beatEvery(heartbeatMs) });
    // Heartbeats are due every third of the heartbeat timeout, whatever `reapEveryMs` is: the
    // timer runs at the shorter of the two, and reaps only every `reapEveryMs`.
    const tickMs = Math.min(this.reapEveryMs, beatEvery(heartbeatMs));
    if (this.timer !== undefined && tickMs >= this.tickMs) return;
    clearInterval(this.timer);
    this.tickMs = tickMs;
    this.timer = this.detached(() => setInterval(() => this.tick(), tickMs).unref());
  }

  /** Run `fn` outside any activity's context, so the client calls it makes outlive that activity. */
  detached<T>(fn: () => T): T {
    return this.outside.runInAsyncScope(fn);
  }

  /** How many task tokens this worker watches. */
  get size(): number {
    let n = 0;
    for (const entry of this.watched.values()) n += entry.parked.size;
    return n;
  }

  /**
   * Stop watching, and fail every waiter still watched with a retryable `FireOnceInFlight` (retry
   * at once), as a worker that shuts down fails its running activities so that Temporal retries
   * them sooner: with this worker gone, no one would heartbeat them or reap their lock, and they
   * would wait for their heartbeat timeout, or without one for a commit or their start-to-close
   * timeout. Their retries park on a worker that runs, or fast-forward. Resolves once every
   * failure call has returned, or after `timeoutMs` if given, with the number of waiters whose
   * failure Temporal had not answered by then (0 when it answered all): a Temporal that never
   * answers would otherwise keep a stopping worker from stopping. Never rejects.
   * With `client`, only the waiters one of several workers sharing this watch parked through it
   * are failed (through it: its connection may be closed once the worker stops), and the watch goes on.
   */
  async close(timeoutMs?: number, client?: Completer['client']): Promise<number> {
    if (timeoutMs !== undefined) positiveInteger('ms', MAX_TIMER_MS)('ParkedWatch.close: timeoutMs', timeoutMs);
    const leaving = this.leave(client);
    let unanswered = 0;
    const failed = this.detached(() =>
      Promise.all(
        leaving.flatMap(({ spot, parked }) => {
          const why = `the worker that parked this call on step ${JSON.stringify(spot.target.step)} shut down; retry`;
          parked[0].completer.log.info('fire-once: worker stopping; failing its parked waiters so that they retry at once', {
            ...logOf(spot),
            waiters: String(parked.length),
          });
          // One call per waiter, so that what is left unanswered can be counted.
          return parked.map(({ token, completer }) => {
            unanswered++;
            return failWaiters(completer, [token], why)
              .catch((err: unknown) => gone(completer, 'fail', err))
              .finally(() => unanswered--);
          });
        }),
      ),
    );
    if (timeoutMs === undefined) await failed;
    else await atMost(failed, timeoutMs);
    return unanswered;
  }

  /**
   * Stop watching the waiters parked through `client` (all of them without it), and return them
   * by `(scope, step)`. A step still watched for other workers is handed over through one of theirs.
   */
  private leave(client: Completer['client'] | undefined): { spot: ParkingSpot; parked: Parked[] }[] {
    const leaving: { spot: ParkingSpot; parked: Parked[] }[] = [];
    for (const [waitersKey, entry] of this.watched) {
      const parked: Parked[] = [];
      for (const [key, p] of entry.parked) {
        if (client !== undefined && p.completer.client !== client) continue;
        parked.push(p);
        entry.parked.delete(key);
      }
      if (parked.length > 0) leaving.push({ spot: entry.spot, parked });
      const staying = entry.parked.values().next();
      if (staying.done) this.watched.delete(waitersKey);
      else if (entry.completer.client === client) entry.completer = staying.value.completer;
    }
    if (this.watched.size === 0) this.stop();
    return leaving;
  }

  private stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.tickMs = Infinity;
  }

  private tick(): void {
    if (this.watched.size === 0) {
      this.stop();
      return;
    }
    const now = Date.now();
    // A tick a little early (timers drift) still reaps: reaps never come further apart than reapEveryMs plus one tick.
    const reap = now + this.tickMs / 2 >= this.nextReap;
    if (reap) this.nextReap = now + this.reapEveryMs;
    for (const entry of this.watched.values()) {
      this.heartbeat(entry, now + this.tickMs / 2);
      if (reap && !entry.busy) {
        entry.busy = true;
        void this.reap(entry)
          .catch((err: unknown) =>
            entry.completer.log.error('fire-once: a reap of parked waiters failed', { ...logOf(entry.spot), error: (err as Error).message }),
          )
          .finally(() => (entry.busy = false));
      }
    }
  }

  private async reap(entry: Watched): Promise<void> {
    const mine = [...entry.parked.keys()];
    const { spot } = entry;
    /** Stop watching the tokens parked before this reap, and give them back. */
    const forget = (): Uint8Array[] => {
      const tokens = mine.flatMap((key) => entry.parked.get(key)?.token ?? []);
      for (const key of mine) entry.parked.delete(key);
      this.unwatchIfEmpty(entry);
      return tokens;
    };
    let outcome: ReapOutcome;
    try {
      outcome = await this.lot.reap(spot);
    } catch (err) {
      const { completer } = entry;
      // Fail this worker's parked waiters as a waiter in its slot fails on its next poll: retryably
      // when Redis is away (FireOnceStoreUnavailable), so their retries check again once it is
      // back; for good when the artifact is not one this library wrote (FireOnceCorruptArtifact).
      // Anything else is tried again at the next reap.
      const failsThem = err instanceof FireOnceStoreUnavailable || (err instanceof FireOnceError && !err.retryable);
      if (!failsThem) {
        completer.log.warn('fire-once: could not check on parked waiters; trying again', { ...logOf(spot), error: (err as Error).message });
        return;
      }
      completer.log.warn('fire-once: parked waiters cannot be handed over; failing them as their acquire would fail', {
        ...logOf(spot),
        type: err.type,
        error: err.message,
      });
      await failWaitersWith(completer, forget(), toApplicationFailure(err));
      // A reap that timed out may still land and take the list: hand over what it took.
      if (err instanceof FireOnceStoreUnavailable) err.late?.then((late) => handOverReaped(completer, spot, late as ReapOutcome)).catch(() => undefined);
      return;
    }
    if (outcome.kind === 'held') {
      // A lock stands again (one that a waiter put back now waits on): a later miss starts anew.
      for (const parked of entry.parked.values()) parked.missingSince = undefined;
      return;
    }
    // The lock ended: a token of this worker's on the list is handed over now; one that is not was
    // taken by whoever committed or released, and is forgotten once it stays away for the window.
    const listed = new Set(outcome.waiters.map((waiter) => parseWaiter(waiter).token.toString('base64')));
    const now = Date.now();
    for (const key of mine) {
      const parked = entry.parked.get(key);
      if (parked === undefined || listed.has(key) || now - (parked.missingSince ??= now) >= HAND_BACK_WINDOW_MS) entry.parked.delete(key);
    }
    this.unwatchIfEmpty(entry);
    // Read after the reap's round trip: a worker that stopped meanwhile has handed this on, or
    // left, and another worker's newer waiter on the step has an entry of its own.
    await handOverReaped((this.watched.get(spot.waitersKey) ?? entry).completer, spot, outcome);
  }

  /** Stop watching `entry`'s step once it has no waiter, unless a newer entry took its place. */
  private unwatchIfEmpty(entry: Watched): void {
    if (entry.parked.size === 0 && this.watched.get(entry.spot.waitersKey) === entry) this.watched.delete(entry.spot.waitersKey);
  }

  /** Heartbeat every waiter of `entry` whose next beat is due by `due`. */
  private heartbeat(entry: Watched, due: number): void {
    const now = Date.now();
    for (const [key, parked] of entry.parked) {
      if (parked.heartbeatMs === undefined || due < parked.nextBeat) continue;
      parked.nextBeat = now + beatEvery(parked.heartbeatMs);
      parked.completer.client.activity.heartbeat(parked.token, parked.details).then(
        () => (parked.beatFailing = false),
        (err: unknown) => this.beatFailed(entry, key, parked, err),
      );
    }
  }

  /** A heartbeat of a parked waiter did not go through: unwatch it if its attempt is over, or beat again. */
  private beatFailed(entry: Watched, key: string, parked: Parked, err: unknown): void {
    if (endedByBeat(parked.completer, parked.token, err)) {
      entry.parked.delete(key);
      return;
    }
    // Temporal did not answer (a restart, a network blip past the client's retries): keep it
    // and beat again; its heartbeat timeout ends it only if that goes on.
    if (!parked.beatFailing)
      parked.completer.log.warn('fire-once: could not heartbeat a parked waiter; trying again at each beat', { error: (err as Error).message });
    parked.beatFailing = true;
  }
}

function beatEvery(heartbeatMs: number | undefined): number {
  return heartbeatMs === undefined ? Infinity : Math.max(Math.floor(heartbeatMs / 3), 100);
}
