import type { Redis } from 'ioredis';
import { holderId } from '../core/guard';
import type { FireOnceKeys } from '../core/keys';
import { CliError, EXIT } from './exit-codes';
import { appendEvent, findLatest } from './log';
import type { RawConnection } from './raw-connection';

/** What `fire-once release` did, or with `force` unset would do. */
export interface ReleaseResult {
  readonly key: string;
  readonly scope: string;
  readonly step: string;
  readonly holder: string;
  readonly tokenHash?: string;
  readonly fencingToken?: number;
  /** TTL the lock had left when it was read; `null` for none. */
  readonly ttlMs: number | null;
  readonly released: boolean;
  /** The `release-forced` entry's stream ID; `null` when appending it failed (see `logError`). */
  readonly logEntryId?: string | null;
  readonly logError?: string;
}

/**
 * Force-release the lock of `(scope, step)`, for a lock left behind by a crashed worker. Deletes
 * it only if it still holds the token read a moment before (WATCH/MULTI: a lock taken over in
 * between is left alone, exit 5), wakes the scope's waiters like a failure release does, and
 * records `release-forced` in the dispatch log, waiting for Redis to accept it. Without `force`
 * it only reads the lock and says what it would release.
 */
export async function release(
  redis: Redis,
  keys: FireOnceKeys,
  scope: string,
  step: string,
  force: boolean,
  openRaw: () => Promise<RawConnection>,
): Promise<ReleaseResult> {
  const key = keys.lock(scope, step);
  await redis.watch(key);
  let watching = true;
  try {
    const [type, pttl] = await Promise.all([redis.type(key), redis.pttl(key)]);
    if (type === 'none') throw new CliError(`no lock at ${key}: nothing to release`, EXIT.notFound);
    const lock = type === 'hash' ? await redis.hgetall(key) : {};
    const seen: ReleaseResult = {
      key,
      scope,
      step,
      holder: lock.o ?? '',
      ...(lock.t ? { tokenHash: holderId(lock.t) } : {}),
      ...(lock.f ? { fencingToken: Number(lock.f) } : {}),
      ttlMs: pttl < 0 ? null : pttl,
      released: false,
    };
    if (!force) return seen;
    const done = await redis.multi().del(key).publish(keys.wakeChannel(scope), 'release').exec();
    watching = false; // EXEC ends the WATCH, whatever it answered
    if (done === null) {
      throw new CliError(`the lock at ${key} changed while it was being released (taken over or renewed); nothing deleted. Inspect it and try again`, EXIT.conflict);
    }
    try {
      const jobType = await jobTypeOf(openRaw, keys, scope, step, seen.tokenHash);
      const id = await appendEvent(redis, keys.log(), {
        decision: 'release-forced',
        scope,
        step,
        jobType,
        ...(seen.tokenHash ? { holder: seen.tokenHash } : {}),
        ...(seen.fencingToken !== undefined ? { fencingToken: seen.fencingToken } : {}),
      });
      return { ...seen, released: true, logEntryId: id };
    } catch (err) {
      return { ...seen, released: true, logEntryId: null, logError: (err as Error).message };
    }
  } finally {
    if (watching) await redis.unwatch().catch(() => undefined);
  }
}

/**
 * The lock does not store its job type; the holder's `dispatched` entry in the dispatch log does.
 * Read it from there so the `release-forced` entry counts under the right job type in reports;
 * `''` when the log has no such entry (e.g. `dispatchLog: false`).
 */
async function jobTypeOf(openRaw: () => Promise<RawConnection>, keys: FireOnceKeys, scope: string, step: string, tokenHash: string | undefined): Promise<string> {
  const raw = await openRaw();
  try {
    const entry = await findLatest(
      raw,
      keys.log(),
      ({ event }) => event.decision === 'dispatched' && event.scope === scope && event.step === step && (tokenHash === undefined || event.holder === tokenHash),
    );
    return entry?.event.jobType ?? '';
  } finally {
    raw.close();
  }
}
