import { createHash, randomBytes } from 'node:crypto';
import { FireOnceError, FireOnceStoreUnavailable, type FireOnceErrorContext } from './errors';
import { FireOnceKeys, encodeId } from './keys';
import { checkDuration, resolveGuardOptions, type FireOnceGuardOptions, type ResolvedGuardOptions } from './options';
import { acquireScript, commitScript, releaseScript, type RedisClient } from './scripts';

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
}

/** A held lock: what {@link FireOnceGuard.commit} and {@link FireOnceGuard.release} need. */
export interface Lease {
  readonly target: DispatchTarget;
  readonly lockKey: string;
  readonly artifactKey: string;
  /** The random token the lock holds. Secret to its owner: log {@link holderId} instead. */
  readonly token: string;
}

/** The decision of {@link FireOnceGuard.acquire}. */
export type AcquireOutcome =
  | { readonly kind: 'fast-forward'; readonly artifact: Buffer; readonly artifactKey: string }
  | { readonly kind: 'acquired'; readonly lease: Lease }
  | { readonly kind: 'held'; readonly ttlMs: number; readonly lockKey: string };

/** Per-call overrides of the guard's TTLs. */
export interface AcquireOptions {
  readonly lockTtlMs?: number;
}

/** A short hash of a lock token, safe to log. */
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
    const artifactKey = this.artifactKey(target);
    const token = randomBytes(16).toString('base64url');
    const mode = target.externalArtifactKey === undefined ? 'result' : 'exists';
    const reply = await this.call(contextOf(target, lockKey), () =>
      acquireScript(this.redis, [artifactKey, lockKey], [token, lockTtlMs, mode], true),
    );
    switch (reply[0]) {
      case 1:
        return { kind: 'fast-forward', artifact: Buffer.from(reply[1]), artifactKey };
      case 2:
        return { kind: 'acquired', lease: { target, lockKey, artifactKey, token } };
      case 3:
        return { kind: 'held', ttlMs: Number(reply[1]), lockKey };
      default:
        throw new FireOnceStoreUnavailable(`unexpected reply from acquire script: ${String(reply[0])}`, contextOf(target, lockKey));
    }
  }

  /**
   * Store the result artifact after a successful dispatch. The lock is left to expire.
   * Resolves `true` if the lock was still ours, `false` if it had expired or moved on.
   */
  async commit(lease: Lease, artifact: Buffer, options: { readonly artifactTtlMs?: number } = {}): Promise<boolean> {
    const ttl = options.artifactTtlMs === undefined ? this.options.artifactTtlMs : checkDuration('artifactTtlMs', options.artifactTtlMs);
    const reply = await this.call(contextOf(lease.target, lease.artifactKey, lease.token), () =>
      commitScript(this.redis, [lease.artifactKey, lease.lockKey], [lease.token, artifact, ttl]),
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
      releaseScript(this.redis, [lease.lockKey], [lease.token]),
    );
    return reply === 1;
  }

  /** The artifact key the target is checked against: the external one, or the guard's own. */
  artifactKey(target: DispatchTarget): string {
    if (target.externalArtifactKey === undefined) return this.keys.artifact(target.scope, target.jobType);
    encodeId('jobType', target.jobType); // validated even when unused in the key
    return target.externalArtifactKey;
  }

  private async call<T>(context: FireOnceErrorContext, op: () => Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new FireOnceStoreUnavailable(`Redis did not answer within ${this.options.storeTimeoutMs} ms`, context)),
        this.options.storeTimeoutMs,
      );
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
