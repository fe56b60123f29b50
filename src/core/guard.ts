import { createHash, randomUUID } from 'node:crypto';
import { FireOnceCorruptArtifact, FireOnceError, FireOnceKeyConflict, FireOnceStoreUnavailable, type FireOnceErrorContext } from './errors';
import { FireOnceKeys, encodeId } from './keys';
import { checkDuration, resolveGuardOptions, type FireOnceGuardOptions, type ResolvedGuardOptions } from './options';
import { acquireScript, commitScript, extendScript, invalidateScript, releaseScript, type RedisClient } from './scripts';

/** What one dispatch is guarded on. */
export interface DispatchTarget {
  /** The session or job the dispatch belongs to; shared by every invocation that must not repeat it. */
  readonly scope: string;
  /** The step whose dispatch fires once; names the lock. */
  readonly step: string;
  /** The job type whose result artifact ends the step; names the artifact. */
  readonly jobType: string;
  /**
   * A key written by someone else (the job) once the job's artifact is durable. When set, the
   * guard only tests that key exists and never writes an artifact itself.
   */
  readonly externalArtifactKey?: string;
  /**
   * Who asks: a later attempt of the same call has the same holder, so it is never mistaken for a
   * conflicting stranger. The Temporal adapter uses workflow ID, run ID and activity ID.
   */
  readonly holder?: string;
  /**
   * A hash of the call's arguments. A later call with the same scope and step but another hash
   * gets `FireOnceKeyConflict`. Omit it to skip the check.
   */
  readonly argsHash?: string;
}

/** A held lock: what {@link FireOnceGuard.commit} and {@link FireOnceGuard.release} need. */
export interface Lease {
  readonly target: DispatchTarget;
  readonly lockKey: string;
  readonly artifactKey: string;
  readonly fenceKey: string;
  /** The random token the lock holds. Secret to its owner: log {@link holderId} instead. */
  readonly token: string;
  /**
   * The fencing token: strictly greater than every earlier holder's of this `(scope, step)`.
   * Send it with every write to a downstream system, which rejects writes with a lower one.
   */
  readonly fencingToken: number;
}

/** The decision of {@link FireOnceGuard.acquire}. */
export type AcquireOutcome =
  | { readonly kind: 'fast-forward'; readonly artifact: Buffer; readonly artifactKey: string; readonly ttlMs: number }
  | { readonly kind: 'acquired'; readonly lease: Lease }
  | {
      readonly kind: 'held';
      readonly ttlMs: number;
      readonly lockKey: string;
      /** The holder identity stored with the lock. */
      readonly holder: string;
      /** True when the holder is an earlier attempt of this very call. */
      readonly sameHolder: boolean;
      readonly fencingToken: number;
    };

/** Per-call overrides of the guard's TTLs. */
export interface AcquireOptions {
  /** The lock's initial TTL: a lease to be renewed, or a fixed TTL. */
  readonly lockTtlMs?: number;
}

/**
 * A short hash of a lock token, safe to log.
 *
 * @example
 * ```ts
 * import { holderId } from 'temporal-fire-once';
 * holderId('a-secret-lock-token'); // 12 hex characters, safe to log
 * ```
 */
export function holderId(token: string): string {
  return createHash('sha256').update(token).digest('hex').slice(0, 12);
}

/**
 * The fire-once guard on Redis alone, with no Temporal in it: the artifact check, the lock, the
 * commit on success and the compare-and-delete on failure. Each is one round trip.
 *
 * @example
 * ```ts
 * import { FireOnceGuard } from 'temporal-fire-once';
 * import { Redis } from 'ioredis';
 *
 * async function dispatchOnce(redis: Redis, run: () => Promise<Buffer>): Promise<Buffer | undefined> {
 *   const guard = new FireOnceGuard({ redis, lockTtlMs: 60_000 });
 *   const target = { scope: 'session-42', step: 'summarise', jobType: 'summary' };
 *   const outcome = await guard.acquire(target);
 *   if (outcome.kind === 'fast-forward') return outcome.artifact; // done before: no dispatch
 *   if (outcome.kind === 'held') return undefined;               // in flight elsewhere
 *   try {
 *     const result = await run();
 *     await guard.commit(outcome.lease, result); // the lock stays until its TTL
 *     return result;
 *   } catch (err) {
 *     await guard.release(outcome.lease); // only on failure, only if still ours
 *     throw err;
 *   }
 * }
 * ```
 */
export class FireOnceGuard {
  readonly options: ResolvedGuardOptions;
  readonly keys: FireOnceKeys;

  constructor(options: FireOnceGuardOptions) {
    this.options = resolveGuardOptions(options);
    this.keys = new FireOnceKeys(this.options.keyPrefix);
  }

  get redis(): RedisClient {
    return this.options.redis;
  }

  /**
   * One round trip: fast-forward if the artifact exists, otherwise try to take the lock with a
   * fresh token. Invalid IDs throw `FireOnceInvalidId` before Redis is asked anything.
   */
  async acquire(target: DispatchTarget, options: AcquireOptions = {}): Promise<AcquireOutcome> {
    const lockTtlMs = options.lockTtlMs === undefined ? this.options.lockTtlMs : checkDuration('lockTtlMs', options.lockTtlMs);
    const lockKey = this.keys.lock(target.scope, target.step);
    const fenceKey = this.keys.fence(target.scope, target.step);
    const artifactKey = this.artifactKey(target);
    const token = randomUUID(); // 122 random bits, and cheaper than randomBytes
    const mode = target.externalArtifactKey === undefined ? 'result' : 'exists';
    const context = contextOf(target, lockKey);
    const reply = await this.call(
      context,
      () =>
        acquireScript(
        this.redis,
        [artifactKey, lockKey, fenceKey],
        [token, lockTtlMs, mode, target.holder ?? '', target.argsHash ?? '', this.fenceTtlMs(lockTtlMs)],
          true,
        ),
      // A timed-out acquire may still run later (ioredis keeps it queued while offline): queue a
      // compare-and-delete of the same token right behind it, so a lock nobody holds never stays.
      () => void releaseScript(this.redis, [lockKey], [token, '']).catch(() => undefined),
    );
    switch (reply[0]) {
      case 1:
        return { kind: 'fast-forward', artifact: Buffer.from(reply[1]), artifactKey, ttlMs: Number(reply[2]) };
      case 2:
        return { kind: 'acquired', lease: { target, lockKey, artifactKey, fenceKey, token, fencingToken: Number(reply[1]) } };
      case 3: {
        const holder = reply[2].toString();
        return { kind: 'held', ttlMs: Number(reply[1]), lockKey, holder, sameHolder: holder !== '' && holder === target.holder, fencingToken: Number(reply[3]) };
      }
      case 4: {
        const where = reply[1].toString() === 'artifact' ? 'the stored artifact was produced' : 'the dispatch in flight was started';
        throw new FireOnceKeyConflict(
          `step ${JSON.stringify(target.step)} in scope ${JSON.stringify(target.scope)} was called with other arguments than ${where} with`,
          { ...context, key: reply[1].toString() === 'artifact' ? artifactKey : lockKey },
        );
      }
      case 5:
        throw new FireOnceCorruptArtifact(`stored artifact is not one this library wrote: ${reply[1].toString()}`, { ...context, key: artifactKey });
      default:
        throw new FireOnceStoreUnavailable(`unexpected reply from acquire script: ${String(reply[0])}`, context);
    }
  }

  /**
   * Store the result artifact after a successful dispatch. The lock is left to expire.
   * Resolves `true` if the lock was still ours, `false` if it had expired or moved on.
   */
  async commit(lease: Lease, artifact: Buffer, options: { readonly artifactTtlMs?: number } = {}): Promise<boolean> {
    const ttl = options.artifactTtlMs === undefined ? this.options.artifactTtlMs : checkDuration('artifactTtlMs', options.artifactTtlMs);
    const reply = await this.call(contextOf(lease.target, lease.artifactKey, lease.token), () =>
      commitScript(this.redis, [lease.artifactKey, lease.lockKey], [lease.token, artifact, ttl, lease.target.argsHash ?? '', this.channel(lease.target)]),
    );
    return reply === 1;
  }

  /**
   * Compare-and-delete the lock after a failed dispatch. Resolves `true` if it was ours and is
   * gone, `false` if it was refused (expired, or another holder's): a stale owner never deletes a
   * newer owner's lock.
   */
  async release(lease: Lease): Promise<boolean> {
    const reply = await this.call(contextOf(lease.target, lease.lockKey, lease.token), () =>
      releaseScript(this.redis, [lease.lockKey], [lease.token, this.channel(lease.target)]),
    );
    return reply === 1;
  }

  /**
   * Compare-and-expire: set the lock's TTL to `lockTtlMs` if it still holds this lease's token.
   * Renews a lease, or holds the lock after an external-artifact dispatch succeeded. Resolves
   * `false` if the lock was lost (expired or another holder's); nothing is changed then.
   */
  async extend(lease: Lease, lockTtlMs: number): Promise<boolean> {
    const ttl = checkDuration('lockTtlMs', lockTtlMs);
    const reply = await this.call(contextOf(lease.target, lease.lockKey, lease.token), () =>
      extendScript(this.redis, [lease.lockKey, lease.fenceKey], [lease.token, ttl, this.fenceTtlMs(ttl)]),
    );
    return reply === 1;
  }

  /**
   * Delete the result artifact of `(scope, jobType)` so that the next invocation dispatches
   * again, and publish the key so every worker's local cache drops its copy. Resolves whether
   * an artifact existed.
   */
  async invalidate(scope: string, jobType: string): Promise<boolean> {
    const key = this.keys.artifact(scope, jobType);
    const reply = await this.call({ key, scope, jobType }, () => invalidateScript(this.redis, [key], [this.keys.invalidations()]));
    return reply === 1;
  }

  /**
   * The fencing counter outlives every lock and artifact of its step, so tokens never restart
   * while a holder or its result can still be around.
   */
  private fenceTtlMs(lockTtlMs: number): number {
    return this.options.artifactTtlMs + Math.max(lockTtlMs, this.options.lockTtlMs);
  }

  private channel(target: DispatchTarget): string {
    return this.options.publishWakeUps ? this.keys.wakeChannel(target.scope) : '';
  }

  /** The artifact key the target is checked against: the external one, or the guard's own. */
  artifactKey(target: DispatchTarget): string {
    if (target.externalArtifactKey === undefined) return this.keys.artifact(target.scope, target.jobType);
    encodeId('jobType', target.jobType); // validated even when unused in the key
    return target.externalArtifactKey;
  }

  private async call<T>(context: FireOnceErrorContext, op: () => Promise<T>, onTimeout?: () => void): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        onTimeout?.();
        reject(new FireOnceStoreUnavailable(`Redis did not answer within ${this.options.storeTimeoutMs} ms`, context));
      }, this.options.storeTimeoutMs);
    });
    try {
      return await Promise.race([op(), timeout]);
    } catch (err) {
      if (err instanceof FireOnceError) throw err;
      const message = err instanceof Error ? err.message : String(err);
      throw new FireOnceStoreUnavailable(`Redis call failed: ${message}`, context, { cause: err });
    } finally {
      clearTimeout(timer);
    }
  }
}

function contextOf(target: DispatchTarget, key: string, token?: string): FireOnceErrorContext {
  return {
    key,
    scope: target.scope,
    step: target.step,
    jobType: target.jobType,
    ...(token === undefined ? {} : { holder: holderId(token) }),
  };
}
