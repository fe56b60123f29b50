import { redisTimeMicros } from '../core/dispatch-log';
import { FireOnceGuard } from '../core/guard';
import type { FireOnceKeys } from '../core/keys';
import type { RedisClient } from '../core/scripts';
import { deleted } from './connect';
import { CliError, EXIT } from './exit-codes';
import { readLock } from './inspect';
import { appendEvent, loggedJobType } from './log';
import { scanKeys } from './scan';

/**
 * A lock of the same scope that may still hold invocations of the job type off after the artifact
 * is gone: a dispatch in flight, or a lock held after an external-artifact dispatch. (A commit
 * deletes its lock, so a lock that stands was never committed.) Locks whose dispatch the log files
 * under another job type are left out: they have nothing to do with this artifact.
 */
export interface StandingLock {
  readonly step: string;
  readonly key: string;
  readonly ttlMs: number | null;
  /** The job type its holder's `dispatched` entry names; `''` when the log does not say (it is off, or trimmed). */
  readonly jobType: string;
  /** What the key holds when it is no lock this library writes (`release` refuses it). */
  readonly foreign?: string;
}

/** What `fire-once invalidate` deleted, or with `force` unset would delete. */
export interface InvalidateResult {
  readonly scope: string;
  readonly jobType: string;
  /** The artifact keys present: the guard's `a:` key and the suggested `x:` key. */
  readonly keys: readonly string[];
  readonly deleted: boolean;
  /** Locks of the scope still held: until they expire or are released, invocations stay held off. */
  readonly standingLocks: readonly StandingLock[];
  readonly logEntryId?: string | null;
  readonly logError?: string;
}

/**
 * Delete the artifact of `(scope, jobType)` in one namespace so that the next invocation there
 * runs again: the guard's own `a:` key through `FireOnceGuard.invalidate` (which also tells every
 * worker's local artifact cache to drop its copy) and, if present, the suggested `x:` key. Keys of
 * other namespaces are never touched. Records
 * `invalidated` in the dispatch log and waits for Redis to accept it. Without `force` it only
 * says what it would delete.
 */
export async function invalidate(redis: RedisClient, keys: FireOnceKeys, scope: string, jobType: string, force: boolean): Promise<InvalidateResult> {
  const candidates = [keys.artifact(scope, jobType), keys.external(scope, jobType)];
  const exists = await Promise.all(candidates.map((key) => redis.exists(key)));
  const present = candidates.filter((_, i) => exists[i] === 1);
  const guard = new FireOnceGuard({ redis, keyPrefix: keys.prefix, namespace: keys.namespace });
  if (present.length === 0) {
    // A worker's local cache may still hold a copy that Redis no longer has: with --force, tell
    // the caches anyway (invalidate.lua publishes whether or not the artifact exists).
    if (force) await guard.invalidate(scope, jobType);
    throw new CliError(
      `no artifact of job type ${JSON.stringify(jobType)} in scope ${JSON.stringify(scope)} (${candidates.join(', ')}): nothing to invalidate${force ? '; local caches were told to drop any copy' : ''}`,
      EXIT.notFound,
    );
  }
  const standingLocks = await locksOf(redis, keys, scope, jobType);
  const seen = { scope, jobType, keys: present, deleted: false, standingLocks };
  if (!force) return seen;
  const [artifactKey, externalKey] = candidates;
  // Read just before the delete: an acquire from here to the delete finds the artifact and
  // fast-forwards, so every dispatch with a lower fencing token came before the invalidation and
  // every later one after it, whichever entry reaches the log first (`fire-once report`).
  const redisTime = await redisTimeMicros(redis, artifactKey);
  if (present.includes(artifactKey)) await deleted(redis, artifactKey, () => guard.invalidate(scope, jobType));
  if (present.includes(externalKey)) await deleted(redis, externalKey, () => redis.del(externalKey));
  try {
    const id = await appendEvent(redis, keys.log(), { decision: 'invalidated', namespace: keys.namespace, scope, step: '', jobType, redisTime });
    return { ...seen, deleted: true, logEntryId: id };
  } catch (err) {
    return { ...seen, deleted: true, logEntryId: null, logError: (err as Error).message };
  }
}

async function locksOf(redis: RedisClient, keys: FireOnceKeys, scope: string, jobType: string): Promise<StandingLock[]> {
  const locks: StandingLock[] = [];
  for (const key of await scanKeys(redis, `${keys.scopeBase(scope)}:l:*`)) {
    const step = keys.parse(key)?.id;
    if (step === undefined) continue;
    const { view } = await readLock(redis, keys, scope, step);
    if (!view.present) continue;
    const ttlMs = view.ttlMs ?? null;
    if (view.foreign !== undefined) {
      locks.push({ step, key, ttlMs, jobType: '', foreign: view.foreign });
      continue;
    }
    const logged = await loggedJobType(redis, keys, scope, step, view.tokenHash);
    if (logged === '' || logged === jobType) locks.push({ step, key, ttlMs, jobType: logged });
  }
  return locks;
}
