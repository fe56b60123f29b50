import type { Redis } from 'ioredis';

/** The same lock and artifact lifetimes for every guard, so that they hold the same promise. */
export const LOCK_TTL_MS = 15 * 60 * 1000;
/** How long a stored result lets later invocations fast-forward: seven days, as ours by default. */
export const ARTIFACT_TTL_MS = 7 * 24 * 60 * 60 * 1000;

/** One fire-once decision is about one `(scope, step)`. */
export interface BenchStep {
  readonly scope: string;
  readonly step: string;
}

/** What a guarded dispatch came to. */
export type Decision = { readonly kind: 'ran'; readonly value: string } | { readonly kind: 'fast-forward'; readonly value: string } | { readonly kind: 'held' };

/**
 * One guard under test, all doing the same job: check the artifact, take the lock, run the
 * dispatch, then store the artifact on success or give the lock back on failure.
 */
export interface GuardUnderTest {
  /** Short name used in the table and the JSON. */
  readonly name: string;
  /** The settings it runs with, in words, for RESULTS.md. */
  readonly settings: string;
  /** SCAN MATCH patterns that cover every key it writes, for `MEMORY USAGE`. */
  readonly keyPatterns: readonly string[];
  /** Guard one dispatch; rejects with `run`'s error after giving the lock back. */
  dispatch(step: BenchStep, run: () => Promise<string>): Promise<Decision>;
  /** Stop whatever timers the guard keeps. */
  close?(): Promise<void>;
}

/** Builds a guard on a client, with every key under `prefix`. */
export type GuardFactory = (redis: Redis, prefix: string) => GuardUnderTest;

/** Thrown by a `run` that must not be reached (a fast-forward that ran the job instead). */
export class UnexpectedRunError extends Error {
  override readonly name = 'UnexpectedRunError';
}
