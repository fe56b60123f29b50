import { EXIT, type ExitCode } from '../exit-codes';

/**
 * How one check came out.
 * - `ok`: nothing to do.
 * - `warn`: worth fixing, but the guarantee holds (e.g. the CLI's user lacks a permission).
 * - `fail`: puts the guarantee at risk (a lock or artifact can be lost, so a job can be
 *   dispatched twice), or stops the worker from guarding at all.
 * - `unknown`: the check could not be made (a command denied or renamed).
 */
export type Status = 'ok' | 'warn' | 'fail' | 'unknown';

/** What `doctor` checks, one name per kind of verdict. */
export type CheckName =
  | 'version'
  | 'eviction'
  | 'persistence'
  | 'role'
  | 'replicas'
  | 'replica-sync'
  | 'min-replicas'
  | 'cluster'
  | 'acl-worker'
  | 'acl-cli'
  | 'scripts'
  | 'prefixes';

/** One line of the doctor's report. */
export interface Verdict {
  readonly check: CheckName;
  readonly status: Status;
  /** The node it concerns, `host:port`, when it concerns one. */
  readonly node?: string;
  /** What was found, in one sentence. */
  readonly message: string;
  /** What to change, when anything. */
  readonly fix?: string;
}

/** Build a verdict, leaving `node` and `fix` out when absent (the JSON stays tidy). */
export function verdict(check: CheckName, status: Status, message: string, extra: { node?: string; fix?: string } = {}): Verdict {
  return { check, status, ...(extra.node === undefined ? {} : { node: extra.node }), message, ...(extra.fix === undefined ? {} : { fix: extra.fix }) };
}

/** 1 when any check fails; else 7 when any could not be made; else 0. */
export function exitCodeOf(verdicts: readonly Verdict[]): ExitCode {
  if (verdicts.some((v) => v.status === 'fail')) return EXIT.atRisk;
  if (verdicts.some((v) => v.status === 'unknown')) return EXIT.unchecked;
  return EXIT.ok;
}

/** How many verdicts have each status. */
export function countStatuses(verdicts: readonly Verdict[]): Record<Status, number> {
  const counts: Record<Status, number> = { ok: 0, warn: 0, fail: 0, unknown: 0 };
  for (const v of verdicts) counts[v.status]++;
  return counts;
}
