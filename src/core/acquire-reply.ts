/**
 * What an acquire found, read from acquire.lua's reply (scripts.ts lists every reply): the stored
 * artifact to fast-forward to, or the lock another holder has; each checked against the call's
 * arguments, and anything this protocol never writes refused.
 */
import { FireOnceProtocolError } from './errors';
import type { AcquireOutcome } from './outcomes';
import { ACQUIRE_REPLY, acquireScript, type AcquireReply } from './scripts';
import { contextOf, corruptArtifact, heldLock, storedPayload, type DispatchTarget } from './target';

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
      const { holder, sameHolder, fencingToken } = heldLock(reply[2], target, argsHash, lockKey);
      return { kind: 'held', ttlMs: Number(reply[1]), lockKey, holder, sameHolder, fencingToken };
    }
    case ACQUIRE_REPLY.CORRUPT:
      throw corruptArtifact(reply[1], target, artifactKey);
    default:
      throw new FireOnceProtocolError(`unexpected reply from ${acquireScript.command}: ${String(reply[0])}`, contextOf(target, lockKey));
  }
}
