import { FireOnceCorruptArtifact, FireOnceProtocolError } from './errors';
import { WAITERS_GRACE_MS, type FireOnceGuard } from './guard';
import { checkTarget, contextOf, corruptArtifact, heldLock, storedPayload, type DispatchTarget } from './target';
import { checkArgsHash, formatWaiter, parseArtifact } from './records';
import { PARK_REPLY, REAP_REPLY, parkScript, reapScript } from './scripts';
import { stepKeys, type StepKeys } from './step-keys';
import { StoreCalls } from './store-calls';

/** Where a waiter parks: the keys of one `(scope, step)` and how its artifact is told apart. */
export interface ParkingSpot extends StepKeys {
  readonly target: DispatchTarget;
  /** `'x'` when the job writes its artifact itself (external mode), else `'r'`. */
  readonly mode: 'r' | 'x';
}

/** The decision of {@link ParkingLot.park}. */
export type ParkOutcome =
  /** The result exists: the stored payload, or empty for an external artifact. Not parked. */
  | { readonly kind: 'fast-forward'; readonly artifact: Buffer; readonly artifactKey: string }
  /** No lock stands any more: acquire again. Not parked. */
  | { readonly kind: 'free' }
  /** Parked: the lock's holder (or whoever reaps) completes or fails the task token. */
  | { readonly kind: 'parked'; readonly spot: ParkingSpot; readonly ttlMs: number; readonly fencingToken: number };

/** The decision of {@link ParkingLot.reap}: what to do with the waiters handed over, if any. */
export type ReapOutcome =
  | { readonly kind: 'held' }
  /**
   * The artifact exists: complete them with it (the payload; empty for an external artifact),
   * those whose arguments it was made with (`argsHash`, `''` for an external artifact).
   */
  | { readonly kind: 'done'; readonly artifact: Buffer; readonly argsHash: string; readonly waiters: readonly Buffer[] }
  /** The lock vanished with no commit or release: fail them so that they retry. */
  | { readonly kind: 'free'; readonly waiters: readonly Buffer[] };

/**
 * Parked waiters on Redis alone (PROTOCOL.md §7): {@link park} registers a task token, with the
 * waiter's args hash, on a held lock in the same atomic step that re-checks the artifact and the
 * lock; {@link reap} hands over the waiters of a lock that no commit or release will hand over.
 * Commit and release hand over the rest (`Settled.waiters`).
 *
 * @example
 * ```ts
 * import { FireOnceGuard } from 'temporal-fire-once';
 * import { ParkingLot } from 'temporal-fire-once/core';
 * import { Redis } from 'ioredis';
 *
 * export async function parkOrNot(redis: Redis, taskToken: Buffer): Promise<string> {
 *   const lot = new ParkingLot(new FireOnceGuard({ redis }));
 *   const outcome = await lot.park({ scope: 'session-42', step: 'summarise', jobType: 'summary' }, taskToken);
 *   return outcome.kind; // 'parked', 'free' (acquire again) or 'fast-forward'
 * }
 * ```
 */
export class ParkingLot {
  private readonly store: StoreCalls;

  constructor(readonly guard: FireOnceGuard) {
    this.store = new StoreCalls(guard.options.storeTimeoutMs);
  }

  /** The keys a waiter of `target` parks on. */
  spot(target: DispatchTarget): ParkingSpot {
    return { target, ...stepKeys(this.guard.keys, target), mode: target.externalArtifactKey === undefined ? 'r' : 'x' };
  }

  /** Register `taskToken` (and the args hash of `target`) on the lock of `target` if it is still held; one round trip. */
  async park(target: DispatchTarget, taskToken: Uint8Array): Promise<ParkOutcome> {
    checkTarget('park', target);
    const argsHash = checkArgsHash(target.argsHash);
    const spot = this.spot(target);
    const reply = await this.store.run(
      () => contextOf(target, spot.lockKey),
      parkScript(this.guard.redis, [spot.artifactKey, spot.lockKey, spot.waitersKey], [spot.mode, formatWaiter(argsHash, taskToken), WAITERS_GRACE_MS], true),
    );
    if (Buffer.isBuffer(reply)) return { kind: 'fast-forward', artifact: storedPayload(reply, target, spot.artifactKey), artifactKey: spot.artifactKey };
    if (reply === PARK_REPLY.FREE) return { kind: 'free' };
    switch (reply[0]) {
      case PARK_REPLY.EXISTS:
        return { kind: 'fast-forward', artifact: Buffer.alloc(0), artifactKey: spot.artifactKey };
      case PARK_REPLY.PARKED:
        return { kind: 'parked', spot, ttlMs: Number(reply[1]), fencingToken: heldLock(reply[2], target, argsHash, spot.lockKey).fencingToken };
      case PARK_REPLY.CORRUPT:
        throw corruptArtifact(reply[1], target, spot.artifactKey);
      default:
        throw new FireOnceProtocolError(`unexpected reply from ${parkScript.command}: ${String(reply[0])}`, contextOf(target, spot.lockKey));
    }
  }

  /**
   * Hand over the waiters of `spot` if its artifact exists or its lock vanished; one round trip.
   * A reap that times out fails with `FireOnceStoreUnavailable` whose `late` settles with the
   * outcome once Redis runs it: the waiters it took are then still to be handed over.
   */
  async reap(spot: ParkingSpot): Promise<ReapOutcome> {
    const script = reapScript(this.guard.redis, [spot.artifactKey, spot.lockKey, spot.waitersKey], [spot.mode, WAITERS_GRACE_MS], true);
    return this.store.run(
      () => contextOf(spot.target, spot.waitersKey),
      script.then((reply) => reapOutcome(spot, reply)),
    );
  }
}

/** What a reply of reap.lua means for the waiters of `spot`. */
function reapOutcome(spot: ParkingSpot, reply: Awaited<ReturnType<typeof reapScript>>): ReapOutcome {
  if (reply === REAP_REPLY.HELD) return { kind: 'held' };
  switch (reply[0]) {
    case REAP_REPLY.DONE: {
      const [, record, ...waiters] = reply;
      if (spot.mode === 'x') return { kind: 'done', artifact: Buffer.alloc(0), argsHash: '', waiters };
      const artifact = parseArtifact(record);
      if (artifact === undefined) throw new FireOnceCorruptArtifact('stored artifact is not one this library wrote', contextOf(spot.target, spot.artifactKey));
      return { kind: 'done', artifact: artifact.payload, argsHash: artifact.argsHash, waiters };
    }
    case REAP_REPLY.FREE:
      return { kind: 'free', waiters: reply.slice(1) as Buffer[] };
    case REAP_REPLY.CORRUPT:
      throw corruptArtifact(reply[1], spot.target, spot.artifactKey);
    default:
      throw new FireOnceProtocolError(`unexpected reply from ${reapScript.command}: ${String(reply[0])}`, contextOf(spot.target, spot.waitersKey));
  }
}
