import { randomUUID } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { FireOnceConfigError, FireOnceCorruptArtifact, FireOnceProtocolError, FireOnceStoreUnavailable } from './errors';
import { FireOnceKeys, encodeId } from './keys';
import { GUARD_OPTIONS, callDuration, checkKnownKeys, resolveGuardOptions, type FireOnceGuardOptions, type ResolvedGuardOptions } from './options';
import {
  ACQUIRE_OPTIONS,
  COMMIT_OPTIONS,
  type AcquireOptions,
  type AcquireOutcome,
  type CommitOptions,
  type Committed,
  type Lease,
  type Settled,
} from './outcomes';
import { artifactArgument, checkArgsHash, lockTail, parseLock } from './records';
import {
  ACQUIRE_REPLY,
  acquireScript,
  coalesceWrites,
  COMMIT_REFUSED,
  commitScript,
  extendScript,
  invalidateScript,
  releaseScript,
  type RedisClient,
  type SettleReply,
} from './scripts';
import { ReplicaSync, type Confirmed, type Written } from './replica-sync';
import { StoreCalls } from './store-calls';
import { checkTarget, conflict, contextOf, differs, storedPayload, type DispatchTarget } from './target';

/**
 * How long a parked waiter's registration outlives the lock, so its worker can notice the lock is gone.
 *
 * @example
 * ```ts
 * import { WAITERS_GRACE_MS } from 'temporal-fire-once/core';
 * WAITERS_GRACE_MS; // 60000
 * ```
 */
export const WAITERS_GRACE_MS = 60_000;

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
 *     await guard.commit(outcome.lease, result); // the artifact takes over from the lock
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
  /** The keys of the guard's `namespace`; {@link keysFor} gives another namespace's. */
  readonly keys: FireOnceKeys;
  private readonly store: StoreCalls;
  private readonly replicas: ReplicaSync;
  /** Artifact keys seen to exist, most recent first (`knownArtifacts`); keys only, never results. */
  private readonly known: LRUCache<string, true> | undefined;

  constructor(options: FireOnceGuardOptions) {
    this.options = resolveGuardOptions(options);
    this.keys = new FireOnceKeys(this.options.keyPrefix, this.options.namespace);
    this.store = new StoreCalls(this.options.storeTimeoutMs);
    this.replicas = new ReplicaSync(this.options.redis, this.options.replicaSync, this.options.storeTimeoutMs);
    this.known = this.options.knownArtifacts > 0 ? new LRUCache({ max: this.options.knownArtifacts }) : undefined;
  }

  get redis(): RedisClient {
    return this.options.redis;
  }

  /** The keys of `namespace` (the guard's own when absent). */
  keysFor(namespace: string | undefined): FireOnceKeys {
    return namespace === undefined ? this.keys : this.keys.forNamespace(namespace);
  }

  /**
   * One round trip: fast-forward if the artifact exists, otherwise try to take the lock with a
   * fresh token. Invalid IDs throw `FireOnceInvalidId`, and a target field or option of another
   * name `FireOnceConfigError`, before Redis is asked anything.
   */
  async acquire(target: DispatchTarget, options: AcquireOptions = {}): Promise<AcquireOutcome> {
    checkTarget('acquire', target);
    checkKnownKeys('acquire', options, ACQUIRE_OPTIONS);
    const lockTtlMs = callDuration('lockTtlMs', options.lockTtlMs, this.options.lockTtlMs);
    const argsHash = checkArgsHash(target.argsHash);
    const { lockKey, waitersKey, artifactKey } = this.stepKeys(target);
    const mode = target.externalArtifactKey !== undefined ? 'x' : options.readTtl ? 't' : 'r';
    if (mode === 'r' && this.known?.get(artifactKey) === true) {
      const record = await this.readKnown(target, artifactKey);
      if (record !== undefined) return { kind: 'fast-forward', artifact: storedPayload(record, target, artifactKey), artifactKey };
    }
    const token = randomUUID(); // 122 random bits, and cheaper than randomBytes
    // The compare-and-delete also takes the waiter list: waiters may have parked on the lock in the
    // meantime, and go back on the list for the reap of the worker that parked them (it then finds
    // the lock gone and fails them, so that they retry).
    const undo = () =>
      void releaseScript(this.redis, [lockKey, waitersKey], [token, ''], true)
        .then((reply) => this.handBack({ target, lockKey, artifactKey, waitersKey, token, fencingToken: 0 }, settled({ reply }).waiters))
        .catch(() => undefined);
    const reply = await this.store.run(
      () => contextOf(target, lockKey),
      acquireScript(this.redis, [artifactKey, lockKey], [token, lockTtlMs, mode, lockTail(argsHash, target.holder ?? '')], true),
      // A timed-out acquire may still run later (ioredis keeps it queued while offline): queue a
      // compare-and-delete of the same token right behind it, so a lock nobody holds never stays.
      undo,
    );
    if (typeof reply === 'number') {
      const confirming = this.replicas.confirm({ lockKey, waitersKey, token, lockTtlMs, waitersTtlMs: lockTtlMs + WAITERS_GRACE_MS });
      // A confirm that fails (WAIT denied, the connection lost) or times out undoes the lock as well.
      const undoing = confirming?.catch((err: unknown) => {
        undo();
        throw err;
      });
      const { wanted, acked, lost } = undoing === undefined ? NO_REPLICAS : await this.store.run(() => contextOf(target, lockKey), undoing, undo);
      if (lost)
        throw new FireOnceStoreUnavailable(
          'the lock was lost before the replicas acknowledged it (it expired, or was released or taken, between the acquire and its confirm): nothing was dispatched',
          contextOf(target, lockKey),
        );
      if (acked < wanted) {
        // A lock no replica has would be lost by a failover, and its job dispatched again: undo it.
        undo();
        throw new FireOnceStoreUnavailable(shortfall('lock', wanted, acked, this.options.replicaSync.timeoutMs), contextOf(target, lockKey));
      }
      return { kind: 'acquired', lease: { target, lockKey, artifactKey, waitersKey, token, fencingToken: reply } };
    }
    if (Buffer.isBuffer(reply)) {
      const artifact = storedPayload(reply, target, artifactKey);
      this.known?.set(artifactKey, true);
      return { kind: 'fast-forward', artifact, artifactKey };
    }
    if (Buffer.isBuffer(reply[0])) {
      const artifact = storedPayload(reply[0], target, artifactKey);
      this.known?.set(artifactKey, true);
      return { kind: 'fast-forward', artifact, artifactKey, ttlMs: Number(reply[1]) };
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

  /**
   * Store the result artifact after a successful dispatch; in the same atomic step the lock is
   * deleted if it is still ours, so the artifact takes over with no gap. Resolves whether the lock
   * was still ours, and the waiters that were parked on it. A holder whose lock expired or was
   * taken writes only into an empty slot (no lock, no artifact): `stored` is false otherwise, and
   * nothing changed. If Redis does not answer in time, the
   * `FireOnceStoreUnavailable` carries the commit as `late`, which settles with the same result
   * if the commit lands after all.
   */
  async commit(lease: Lease, artifact: Buffer, options: CommitOptions = {}): Promise<Committed> {
    checkKnownKeys('commit', options, COMMIT_OPTIONS);
    this.checkLease('commit', lease);
    const ttl = callDuration('artifactTtlMs', options.artifactTtlMs, this.options.artifactTtlMs);
    const record = artifactArgument(lease.target.argsHash ?? '', artifact);
    return this.store.run(
      () => contextOf(lease.target, lease.artifactKey, lease.token),
      this.replicas
        .write(commitScript, [lease.artifactKey, lease.lockKey, lease.waitersKey], [lease.token, record, ttl, this.channel(lease.target)], true)
        .then(({ reply, ...rest }) => {
          if (reply === COMMIT_REFUSED) return { ours: false, waiters: [], stored: false };
          this.known?.set(lease.artifactKey, true);
          return { ...settled({ reply, ...rest }), stored: true };
        }),
    );
  }

  /**
   * Compare-and-delete the lock after a failed dispatch. `ours` is false if the release was
   * refused (expired, or another holder's): a stale owner never deletes a newer owner's lock.
   * The waiters parked on a released lock are handed over, to be failed so that they retry.
   */
  async release(lease: Lease): Promise<Settled> {
    this.checkLease('release', lease);
    return this.store.run(
      () => contextOf(lease.target, lease.lockKey, lease.token),
      this.replicas.write(releaseScript, [lease.lockKey, lease.waitersKey], [lease.token, this.channel(lease.target)], true).then(settled),
    );
  }

  /**
   * Compare-and-expire: set the lock's TTL to `lockTtlMs` if it still holds this lease's token.
   * Renews a lease, or holds the lock after a dispatch that stored no artifact. Resolves `false`
   * if the lock was lost (expired or another holder's); nothing is changed then.
   */
  async extend(lease: Lease, lockTtlMs: number): Promise<boolean> {
    this.checkLease('extend', lease);
    const ttl = GUARD_OPTIONS.lockTtlMs.check('lockTtlMs', lockTtlMs);
    return this.store.run(
      () => contextOf(lease.target, lease.lockKey, lease.token),
      this.replicas
        .write(extendScript, [lease.lockKey, lease.waitersKey], [lease.token, ttl, ttl + WAITERS_GRACE_MS, ''])
        .then(({ reply, wanted, acked, waitError }) => {
          // A renewal no replica has would not survive a failover: it counts as a failed renewal.
          if (reply === 1 && acked < wanted)
            throw new FireOnceStoreUnavailable(
              shortfall('lease renewal', wanted, acked, this.options.replicaSync.timeoutMs, waitError),
              contextOf(lease.target, lease.lockKey, lease.token),
            );
          return reply === 1;
        }),
    );
  }

  /**
   * Hold the lock after a dispatch whose result is in hand but not stored (over
   * `maxArtifactBytes`, refused by the codec or the converter), and hand over the waiters parked
   * on it, as {@link commit} does: they waited for this very job, so its outcome is theirs now,
   * not a second dispatch once the lock expires. `lockTtlMs` sets the lock's TTL (`undefined`
   * leaves it, for `'fixed'` mode). `ours` is false, and nothing is handed over, if the lock was lost.
   */
  async keep(lease: Lease, lockTtlMs: number | undefined): Promise<Settled> {
    this.checkLease('keep', lease);
    const ttl = lockTtlMs === undefined ? '' : GUARD_OPTIONS.lockTtlMs.check('lockTtlMs', lockTtlMs);
    return this.store.run(
      () => contextOf(lease.target, lease.lockKey, lease.token),
      this.replicas.write(extendScript, [lease.lockKey, lease.waitersKey], [lease.token, ttl, 0, 'take'], true).then(settled),
    );
  }

  /**
   * Put back on their list the parked waiters a commit, release or hold handed to a caller that
   * cannot complete them (no Temporal client), with the list's grace as its TTL: the reap of the
   * worker that parked them hands them over instead (PROTOCOL.md section 7). One round trip.
   */
  async handBack(lease: Lease, waiters: readonly Buffer[]): Promise<void> {
    this.checkLease('handBack', lease);
    if (waiters.length === 0) return;
    const key = lease.waitersKey;
    const replies = await this.store.run(
      () => contextOf(lease.target, key, lease.token),
      this.redis
        .pipeline()
        .rpush(key, ...waiters)
        .pexpire(key, WAITERS_GRACE_MS)
        .exec(),
    );
    const failed = replies?.find(([err]) => err !== null)?.[0];
    if (failed) throw failed;
  }

  /**
   * Delete the result artifact of `(scope, jobType)` so that the next invocation dispatches
   * again, and publish the key so every worker's local cache drops its copy. Resolves whether
   * an artifact existed.
   */
  async invalidate(scope: string, jobType: string, namespace?: string): Promise<boolean> {
    const keys = this.keysFor(namespace);
    const key = keys.artifact(scope, jobType);
    this.known?.delete(key);
    return this.store.run(
      () => ({ key, scope, jobType }),
      invalidateScript(this.redis, [key], [keys.invalidations()]).then((reply) => reply === 1),
    );
  }

  /** The artifact key the target is checked against: the external one, or the guard's own. */
  artifactKey(target: DispatchTarget): string {
    if (target.externalArtifactKey === undefined) return this.keysFor(target.namespace).artifact(target.scope, target.jobType);
    encodeId('jobType', target.jobType); // validated even when unused in the key
    return this.externalKey(target);
  }

  /**
   * The target's external artifact key, unless the guard must not take it: another scope's or
   * namespace's key, or one it writes itself, would read or replace a result that is not this
   * call's ({@link FireOnceKeys.externalKeyProblem}).
   */
  private externalKey(target: DispatchTarget): string {
    const key = target.externalArtifactKey;
    const problem = this.keysFor(target.namespace).externalKeyProblem(key, target.scope, target.jobType);
    if (problem !== undefined) {
      throw new FireOnceConfigError(
        `the external artifact key of ${JSON.stringify(target.jobType)} in scope ${JSON.stringify(target.scope)} ${problem}`,
        contextOf(target, String(key)),
      );
    }
    return key as string;
  }

  /**
   * The artifact record at a key this guard saw exist, read with a plain `GET`; `undefined` once it
   * is gone, and the key is forgotten. A key that no longer holds a string is left to the script,
   * which reports what it holds.
   */
  private async readKnown(target: DispatchTarget, artifactKey: string): Promise<Buffer | undefined> {
    coalesceWrites(this.redis);
    const read = this.redis.getBuffer(artifactKey).catch((err: unknown) => {
      if (err instanceof Error && err.message.startsWith('WRONGTYPE')) return null;
      throw err;
    });
    const record = await this.store.run(() => contextOf(target, artifactKey), read);
    if (record !== null) return record;
    this.known?.delete(artifactKey);
    return undefined;
  }

  /**
   * A lease names the keys that commit, release and extend write: refuse one whose keys are not
   * those this guard builds for its target (a lease of a guard with another `keyPrefix`, or one
   * edited or made by hand), so that no lease writes into another scope's or prefix's keys.
   */
  private checkLease(what: string, lease: Lease): void {
    const target = lease?.target;
    const keys = target === undefined ? undefined : this.stepKeys(target);
    if (keys === undefined || lease.lockKey !== keys.lockKey || lease.waitersKey !== keys.waitersKey || lease.artifactKey !== keys.artifactKey) {
      throw new FireOnceConfigError(
        `${what}: the lease's keys are not this guard's for its target (keyPrefix ${JSON.stringify(this.keys.prefix)}): pass the lease acquire() returned, unchanged, to a guard with the keyPrefix that acquired it`,
        target === undefined ? {} : contextOf(target, String(lease.lockKey)),
      );
    }
  }

  /** The keys of the target's step, as acquire writes them into its lease: lock, waiter list, artifact. */
  private stepKeys(target: DispatchTarget): Pick<Lease, 'lockKey' | 'waitersKey' | 'artifactKey'> {
    const base = this.keysFor(target.namespace).scopeBase(target.scope);
    const step = encodeId('step', target.step);
    const jobType = encodeId('jobType', target.jobType); // checked even when an external key is used
    const artifactKey = target.externalArtifactKey === undefined ? `${base}:a:${jobType}` : this.externalKey(target);
    return { lockKey: `${base}:l:${step}`, waitersKey: `${base}:w:${step}`, artifactKey };
  }

  private channel(target: DispatchTarget): string {
    return this.options.publishWakeUps ? this.keysFor(target.namespace).wakeChannel(target.scope) : '';
  }
}

const NO_REPLICAS: Confirmed = { wanted: 0, acked: 0 };

function shortfall(what: string, wanted: number, acked: number, timeoutMs: number, waitError?: Error): string {
  const why = waitError === undefined ? '' : `: WAIT failed (${waitError.message})`;
  return `only ${acked} of ${wanted} replica(s) acknowledged the ${what} within ${timeoutMs} ms (replicaSync)${why}`;
}

/**
 * A commit or release. Replicas that did not acknowledge it change nothing: the lock they still
 * hold keeps later invocations waiting until its TTL, never dispatching.
 */
function settled({ reply }: Pick<Written<SettleReply>, 'reply'>): Settled {
  if (typeof reply === 'number') return { ours: reply === 1, waiters: [] };
  const [ours, ...waiters] = reply;
  return { ours: ours === 1, waiters };
}
