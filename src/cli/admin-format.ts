import type { InvalidateResult } from './invalidate';
import type { MigrateResult } from './migrate';
import type { ReleaseResult } from './release';
import { printable, quoted } from './printable';
import { fireOnceCommand, type Target } from './shell';
import { formatMs, table } from './table';

/** The human form of `release`: the lock as it was, and what happened to it. */
export function formatRelease(result: ReleaseResult): string {
  const rows: [string, string][] = [
    ['key', result.key],
    ['holder', result.holder || '(not recorded)'],
    ...(result.tokenHash ? [['token hash', result.tokenHash] as [string, string]] : []),
    ...(result.fencingToken !== undefined ? [['fencing token', String(result.fencingToken)] as [string, string]] : []),
    ['TTL left', result.ttlMs === null ? 'no expiry' : formatMs(result.ttlMs)],
  ];
  const head = result.released
    ? `released the lock of step ${quoted(result.step)} in scope ${quoted(result.scope)}; waiters were woken and the next invocation dispatches again`
    : `would release the lock of step ${quoted(result.step)} in scope ${quoted(result.scope)}; run again with --force to release it`;
  return [head, table([], rows), ...logLine('release-forced', result)].join('\n');
}

/**
 * The human form of `invalidate`: the keys, and any lock that still holds invocations off, with
 * the `release` command that frees it where `target` says (the options `invalidate` was given).
 */
export function formatInvalidate(result: InvalidateResult, target: Target): string {
  const lines = [
    result.deleted
      ? `deleted the artifact of job type ${quoted(result.jobType)} in scope ${quoted(result.scope)}: ${result.keys.join(', ')}`
      : `would delete the artifact of job type ${quoted(result.jobType)} in scope ${quoted(result.scope)}: ${result.keys.join(', ')}; run again with --force to delete it`,
  ];
  for (const lock of result.standingLocks) {
    const ttl = lock.ttlMs === null ? 'no expiry' : `${formatMs(lock.ttlMs)} left`;
    const step = ['--step', lock.step];
    if (lock.foreign !== undefined) {
      lines.push(
        `note: the lock key of step ${quoted(lock.step)} holds ${lock.foreign}, not a lock this library writes (${ttl}); release refuses it: look at ${printable(lock.key)} with redis-cli`,
      );
    } else if (lock.jobType === '') {
      lines.push(
        `note: the lock of step ${quoted(lock.step)} still stands (${ttl}), and the dispatch log does not say which job type it dispatched: if it is this one, invocations stay held off until it expires. Check it with: ${fireOnceCommand('inspect', result.scope, step, target)}; release it with: ${fireOnceCommand('release', result.scope, [...step, '--force'], target)}`,
      );
    } else {
      lines.push(
        `note: the lock of step ${quoted(lock.step)} still stands (${ttl}): invocations stay held off until it expires, or release it with: ${fireOnceCommand('release', result.scope, [...step, '--force'], target)}`,
      );
    }
  }
  lines.push(...logLine('invalidated', result));
  return lines.join('\n');
}

/** The human form of `migrate`. */
export function formatMigrate(result: MigrateResult): string {
  const skipped =
    result.skipped.length === 0
      ? []
      : [`left ${result.skipped.length} key(s) that are not v2 keys this library wrote:`, ...result.skipped.map((k) => `  ${printable(k.key)}: ${k.what}`)];
  if (!result.done) {
    return [
      `nothing migrated: ${result.inFlight.length} v2 lock(s) of dispatches in flight under ${result.prefix}`,
      ...result.inFlight.map((l) => `  ${printable(l.key)} (${formatMs(l.ttlMs)} left)`),
      ...skipped,
    ].join('\n');
  }
  if (result.markedOnly) {
    return [
      `no key of 0.1 under ${result.prefix}:{*: nothing to copy`,
      `prefix ${result.prefix} is now marked protocol 3 (${result.prefix}:protocol), as workers whose Redis user may not write the marker need; if the prefix is mistyped, delete that key`,
      ...skipped,
    ].join('\n');
  }
  return [
    `copied ${result.copied} v2 result(s) into namespace ${quoted(result.namespace)}${result.kept > 0 ? ` (${result.kept} already stored in v3, kept)` : ''}`,
    `prefix ${result.prefix} is marked protocol 3`,
    ...(result.deleted > 0 ? [`deleted ${result.deleted} v2 key(s)`] : []),
    ...skipped,
  ].join('\n');
}

function logLine(decision: string, result: { logEntryId?: string | null }): string[] {
  if (result.logEntryId === undefined) return [];
  return [
    result.logEntryId === null
      ? `the ${decision} entry could not be recorded in the dispatch log`
      : `recorded ${decision} in the dispatch log as ${result.logEntryId}`,
  ];
}
