import { randomUUID } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { foundByAcquire } from './acquire-reply';
import { handleAskingFailures, throughMigration } from './cluster-redirect';
import { FireOnceStoreUnavailable } from './errors';
import { FireOnceKeys } from './keys';
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
import { artifactArgument, checkArgsHash, lockTail } from './records';
import {
  acquireScript,
  coalesceWrites,
  COMMIT_REFUSED,
  commitScript,
  extendScript,
  invalidateScript,
  isCluster,
  releaseScript,
  type RedisClient,
  type SettleReply,
} from './scripts';
import { ReplicaSync, type Confirmed, type Written } from './replica-sync';
import { StoreCalls } from './store-calls';
import { artifactKeyOf, checkLease, keysOf, stepKeys } from './step-keys';
import { checkTarget, contextOf, storedPayload, type DispatchTarget } from './target';

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
    if (isCluster(this.options.redis)) handleAskingFailures(this.options.redis);
  }

  get redis(): RedisClient {
    return this.options.redis;
  }

  /** The keys of `namespace` (the guard's own when absent). */
  keysFor(namespace: string | undefined): FireOnceKeys {
    return keysOf(this.keys, namespace);
  }

  /**
   * One round trip (a second to wait for replicas, when a lock is taken on a Redis with replicas;
   * a plain `GET` first for an artifact `knownArtifacts` saw): fast-forward if the artifact
   * exists, otherwise try to take the lock with a fresh token. Invalid IDs throw `FireOnceInvalidId`, and a target field or option of another
   * name `FireOnceConfigError`, before Redis is asked anything.
   */
  async acquire(target: DispatchTarget, options: AcquireOptions = {}): Promise<AcquireOutcome> {
    checkTarget('acquire', target);
    checkKnownKeys('acquire', options, ACQUIRE_OPTIONS);
    const lockTtlMs = callDuration('lockTtlMs', options.lockTtlMs, this.options.lockTtlMs);
    const argsHash = checkArgsHash(target.argsHash);
    const { lockKey, waitersKey, artifactKey } = stepKeys(this.keys, target);
    const mode = target.externalArtifactKey !== undefined ? 'x' : options.readTtl ? 't' : 'r';
    if (mode === 'r' && this.known?.get(artifactKey) === true) {
      const record = await this.readKnown(target, artifactKey);
      if (record !== undefined) return { kind: 'fast-forward', artifact: storedPayload(record, target, artifactKey), artifactKey };
    }
    const token = randomUUID(); // 122 random bits, and cheaper than randomBytes
    // The compare-and-delete also takes the waiter list: waiters may have parked on the lock in the
    // meantime, and go back on the list for the reap of the worker that parked them (it then finds
    // the lock gone and fails them, so that they retry).
    // Sent again while its slot migrates, so that a lock undone mid-migration does not stay until its TTL.
    const undo = () =>
      void throughMigration(this.redis, this.options.storeTimeoutMs, () => releaseScript(this.redis, [lockKey, waitersKey], [token, ''], true))
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
    const found = foundByAcquire(reply, target, argsHash, lockKey, artifactKey);
    if (found.kind === 'fast-forward' && mode !== 'x') this.known?.set(artifactKey, true);
    return found;
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
    checkLease(this.keys, 'commit', lease);
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
    checkLease(this.keys, 'release', lease);
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
    checkLease(this.keys, 'extend', lease);
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
    checkLease(this.keys, 'keep', lease);
    const ttl = lockTtlMs === undefined ? '' : GUARD_OPTIONS.lockTtlMs.check('lockTtlMs', lockTtlMs);
    return this.store.run(
      () => contextOf(lease.target, lease.lockKey, lease.token),
      this.replicas.write(extendScript, [lease.lockKey, lease.waitersKey], [lease.token, ttl, 0, 'take'], true).then(settled),
    );
  }

  /**
   * Put back on their list the parked waiters a commit, release or hold handed to a caller that
   * cannot complete them (no Temporal client, or an acquire undoing its lock), with the list's grace as its TTL: the reap of the
   * worker that parked them hands them over instead (PROTOCOL.md section 7). One round trip.
   */
  async handBack(lease: Lease, waiters: readonly Buffer[]): Promise<void> {
    checkLease(this.keys, 'handBack', lease);
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
    return artifactKeyOf(this.keys, target);
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
