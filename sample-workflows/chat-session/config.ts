import { encodeId, FireOnceKeys } from '../../src/core';

/** Task queue the chat-session worker polls when run by hand. */
export const TASK_QUEUE = 'chat-session';

/** Key prefix when run by hand; tests and the demo use their own. */
export const DEFAULT_KEY_PREFIX = 'chat-sample';

/** The step that dispatches the summary job; the fire-once lock is named after it. */
export const DISPATCH_STEP = 'dispatch-summary';

/** The job the chat step dispatches; the artifact key is named after it. */
export const SUMMARY_JOB = 'summary';

/** How the job runner behaves, and so how long the lock must last. */
export interface JobTimings {
  /** How long one summary job runs before it resolves. */
  readonly jobMs: number;
  /** How long after the job resolves its artifact is written: the resolved-but-not-written window. */
  readonly artifactDelayMs: number;
}

/** Defaults when run by hand: a slow job and a visible gap before its artifact lands. */
export const DEFAULT_TIMINGS: JobTimings = Object.freeze({ jobMs: 2_000, artifactDelayMs: 500 });

/**
 * The fire-once lock must cover the job's whole life, from dispatch to durable artifact: the
 * queue wait, the job and the write delay, plus margin. Not a round default.
 */
export function lockTtlFor(timings: JobTimings): number {
  return 2 * (timings.jobMs + timings.artifactDelayMs) + 5_000;
}

/** Every key the chat-session sample uses, all under one prefix so that one SCAN removes them. */
export interface ChatKeys {
  /** The prefix shared with the `FireOncePlugin`'s `keyPrefix`. */
  readonly prefix: string;
  /** Redis list of dispatched jobs: pushed at the head, taken from the tail by the job runner. */
  readonly jobs: string;
  /** The jobs the runner `runnerId` has taken and not finished. */
  processing(runnerId: string): string;
  /** Redis list of the jobs whose every run failed (`maxAttempts` of them), newest at the head. */
  readonly deadJobs: string;
  /** INCR'd by the dispatch activity body: the count of dispatches, which the guard does not own. */
  readonly dispatches: string;
  /** The same count for one session, which the client reads: bursts to other sessions may run meanwhile. */
  sessionDispatches(sessionId: string): string;
  /** INCR'd by the job runner each time a job resolves, before its artifact is written. */
  readonly jobsResolved: string;
  /** The artifact a summary job writes, hash-tagged with the session so it shares the lock's slot. */
  summary(sessionId: string, jobType?: string): string;
}

/**
 * The sample's keys under `prefix`. The summary key starts with the guard's
 * `scopeBase(scope)`, `<prefix>:v3:{<namespace>/<session>}`, which keeps it in the lock's Redis
 * Cluster slot and in the namespace the sample's worker files its keys under (`default`).
 *
 * @example
 * ```ts
 * chatKeys('chat-sample').summary('session-7'); // 'chat-sample:v3:{default/session-7}:result:summary'
 * ```
 */
export function chatKeys(prefix: string): ChatKeys {
  const keys = new FireOnceKeys(prefix);
  return {
    prefix,
    jobs: `${prefix}:jobs`,
    processing: (runnerId) => `${prefix}:jobs:processing:${runnerId}`,
    deadJobs: `${prefix}:jobs:dead`,
    dispatches: `${prefix}:count:dispatches`,
    sessionDispatches: (sessionId) => `${prefix}:count:dispatches:${encodeId('scope', sessionId)}`,
    jobsResolved: `${prefix}:count:jobs-resolved`,
    summary: (sessionId, jobType = SUMMARY_JOB) => `${keys.scopeBase(sessionId)}:result:${encodeId('jobType', jobType)}`,
  };
}
