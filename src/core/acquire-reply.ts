/**
 * What an acquire found, read from acquire.lua's reply (scripts.ts lists every reply): the stored
 * artifact to fast-forward to, or the lock another holder has; each checked against the call's
 * arguments, and anything this protocol never writes refused.
 */
import { FireOnceCorruptArtifact, FireOnceProtocolError } from './errors';
import type { AcquireOutcome } from './outcomes';
import { parseLock } from './records';
import { ACQUIRE_REPLY, acquireScript, type AcquireReply } from './scripts';
import { conflict, contextOf, differs, storedPayload, type DispatchTarget } from './target';

/** The outcome of an acquire that took no lock (a reply that is no fencing token). */
export function foundByAcquire(
  reply: Exclude<AcquireReply, number>,
  target: DispatchTarget,
  argsHash: string,
  lockKey: string,
  artifactKey: string,
): Exclude<AcquireOutcome, { kind: 'acquired' }> {
  if (Buffer.isBuffer(reply)) return { kind: 'fast-forward', artifact: storedPayload(reply, target, artifactKey), artifactKey };
  if (Buffer.isBuffer(reply[0])) {
    return { kind: 'fast-forward', artifact: storedPayload(reply[0], target, artifactKey), artifactKey, ttlMs: Number(reply[1]) };
  }
  switch (reply[0]) {
    case ACQUIRE_REPLY.EXISTS:
      return { kind: 'fast-forward', artifact: Buffer.alloc(0), artifactKey, ttlMs: Number(reply[1]) };
    case ACQUIRE_REPLY.HELD: {
      const lock = parseLock(reply[2].toString());
      if (lock === undefined) throw new FireOnceProtocolError('the lock holds a value this protocol never writes', contextOf(target, lockKey));
      const sameHolder = lock.holder !== '' && lock.holder === target.holder;
      if (!sameHolder && differs(argsHash, lock.argsHash)) throw conflict(target, lockKey, 'the dispatch in flight was started');
      return { kind: 'held', ttlMs: Number(reply[1]), lockKey, holder: lock.holder, sameHolder, fencingToken: lock.fencingToken };
    }
    case ACQUIRE_REPLY.CORRUPT:
      throw new FireOnceCorruptArtifact(`stored artifact is not one this library wrote: ${reply[1].toString()}`, contextOf(target, artifactKey));
    default:
      throw new FireOnceProtocolError(`unexpected reply from ${acquireScript.command}: ${String(reply[0])}`, contextOf(target, lockKey));
  }
}
