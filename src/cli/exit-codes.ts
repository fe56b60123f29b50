/**
 * The CLI's exit codes, stable and documented in docs/operating.md. Scripts may rely on them.
 */
export const EXIT = Object.freeze({
  /** Done; for `report`, no duplicate dispatch in the window. */
  ok: 0,
  /** `report` found at least one (scope, step) dispatched more than once in the window. */
  duplicates: 1,
  /** `doctor` found something that puts the guarantee at risk (a check failed). */
  atRisk: 1,
  /** Bad usage: unknown command or option, an option with a value given twice, a missing or malformed argument, or `--force` missing. */
  usage: 2,
  /** Redis unreachable, refused the credentials, or did not answer within `--timeout`. */
  redis: 3,
  /** Nothing to act on: `release` found no lock, `invalidate` found no artifact, `report` found no dispatch log. */
  notFound: 4,
  /**
   * Refused: `release` found the lock changed hands between reading it and deleting it;
   * `migrate` found v2 dispatches in flight, or a prefix written by another protocol version.
   */
  conflict: 5,
  /**
   * Redis can evict the guard's keys (`maxmemory-policy` is not `noeviction`, or cannot be read):
   * the command refused to run. `--allow-evicting-redis` runs it anyway.
   */
  evicting: 6,
  /** `doctor` found nothing at risk, but could not make every check (a command denied or renamed). */
  unchecked: 7,
  /**
   * Refused: a key holds data this library never writes, and the command will not guess what it
   * is (`release`: a lock key of another type or with an unreadable value; `migrate`: a v2-shaped
   * key whose IDs do not decode, or a protocol marker that is not a string; any command: Redis answers
   * `WRONGTYPE` on a key under the prefix). Nothing was changed.
   */
  unexpectedData: 8,
  /** A bug in the CLI itself. */
  internal: 70,
} as const);

/** One of {@link EXIT}'s values. */
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** An error the CLI reports as one line on stderr, ending the process with `exitCode`. */
export class CliError extends Error {
  override readonly name = 'CliError';

  constructor(
    message: string,
    readonly exitCode: ExitCode,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
