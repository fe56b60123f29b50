import { join } from 'node:path';
import { holderId } from '../core/guard';
import type { FireOnceKeys } from '../core/keys';
import { defineScript, type RedisClient } from '../core/scripts';
import { CliError, EXIT } from './exit-codes';
import { appendEvent, findLatest } from './log';

/** `force-release.lua`: compare-and-delete on the lock's type and token as read; 1 if deleted, 0 if refused. */
export const forceReleaseScript = defineScript<[type: string, token: string, channel: string], 0 | 1>(
  'force-release.lua',
  'fireOnceForceReleaseV1',
  1,
  join(__dirname, 'scripts'),
);

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
 * it only if it still holds the token read a moment before (`force-release.lua`, one atomic
 * compare-and-delete: a lock taken over in between is left alone, exit 5), wakes the scope's
 * waiters like a failure release does, and records `release-forced` in the dispatch log, waiting
 * for Redis to accept it. Without `force` it only reads the lock and says what it would release.
 * Works on a standalone Redis and on a Redis Cluster: every key it touches is in the scope's slot.
 */
export async function release(redis: RedisClient, keys: FireOnceKeys, scope: string, step: string, force: boolean): Promise<ReleaseResult> {
  const key = keys.lock(scope, step);
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
  if ((await forceReleaseScript(redis, [key], [type, lock.t ?? '', keys.wakeChannel(scope)])) !== 1) {
    throw new CliError(`the lock at ${key} changed hands (or expired) while it was being released; nothing deleted. Inspect it and try again`, EXIT.conflict);
  }
  try {
    const jobType = await jobTypeOf(redis, keys, scope, step, seen.tokenHash);
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
}

/**
 * The lock does not store its job type; the holder's `dispatched` entry in the dispatch log does.
 * Read it from there so the `release-forced` entry counts under the right job type in reports;
 * `''` when the log has no such entry (e.g. `dispatchLog: false`).
 */
async function jobTypeOf(redis: RedisClient, keys: FireOnceKeys, scope: string, step: string, tokenHash: string | undefined): Promise<string> {
  const entry = await findLatest(redis, keys.log(), { decision: 'dispatched', scope, step, ...(tokenHash === undefined ? {} : { holder: tokenHash }) });
  return entry?.event.jobType ?? '';
}
