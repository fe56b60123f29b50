import { join } from 'node:path';
import type { FireOnceKeys } from '../core/keys';
import { defineScript, type RedisClient } from '../core/scripts';
import { deleted } from './connect';
import { CliError, EXIT } from './exit-codes';
import { readLock } from './inspect';
import { appendEvent, loggedJobType } from './log';

/** `force-release.lua`: compare-and-delete on the lock's value as read; 1 if deleted, 0 if refused. */
export const forceReleaseScript = defineScript<[value: string, channel: string], 0 | 1>(
  'force-release.lua',
  'fireOnceForceReleaseV3',
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
 * compare-and-delete: a lock taken over in between is left alone, exit 5; a key that holds no lock
 * record of this library is left alone too, exit 8), wakes the scope's
 * waiters like a failure release does, and records `release-forced` in the dispatch log, waiting
 * for Redis to accept it. Without `force` it only reads the lock and says what it would release.
 * Works on a standalone Redis and on a Redis Cluster: every key it touches is in the scope's slot.
 */
export async function release(redis: RedisClient, keys: FireOnceKeys, scope: string, step: string, force: boolean): Promise<ReleaseResult> {
  const { view: lock, value } = await readLock(redis, keys, scope, step);
  const { key } = lock;
  if (!lock.present) throw new CliError(`no lock at ${key}: nothing to release`, EXIT.notFound);
  if (value === undefined)
    throw new CliError(
      `${key} holds ${lock.foreign ?? 'something else'}, not a lock this library writes: delete it by hand if it must go`,
      EXIT.unexpectedData,
    );
  const seen: ReleaseResult = {
    key,
    scope,
    step,
    holder: lock.holder ?? '',
    ...(lock.tokenHash ? { tokenHash: lock.tokenHash } : {}),
    ...(lock.fencingToken !== undefined ? { fencingToken: lock.fencingToken } : {}),
    ttlMs: lock.ttlMs ?? null,
    released: false,
  };
  if (!force) return seen;
  // Answered too late but run all the same (the lock is gone): 1, as if in time.
  const released = await deleted(redis, key, () => forceReleaseScript(redis, [key], [value, keys.wakeChannel(scope)]));
  if ((released ?? 1) !== 1) {
    throw new CliError(`the lock at ${key} changed hands (or expired) while it was being released; nothing deleted. Inspect it and try again`, EXIT.conflict);
  }
  try {
    const jobType = await loggedJobType(redis, keys, scope, step, seen.tokenHash);
    const id = await appendEvent(redis, keys.log(), {
      decision: 'release-forced',
      namespace: keys.namespace,
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
