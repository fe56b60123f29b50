/**
 * The bench's job runner: the chat-session sample's downstream service, with a log of its own.
 * The sample's runner (`sample-workflows/chat-session/job-runner.ts`) logs only a dispatch
 * number and counts resolutions in one counter; the bench needs to know which invocation each
 * job came from and when each job resolved, so this one appends every event to a Redis stream.
 */
import { Redis } from 'ioredis';
import type { SummaryJob } from '../../sample-workflows/chat-session/activities';
import type { ChatKeys } from '../../sample-workflows/chat-session/config';
import { sleep } from '../../sample-workflows/shared/redis';

/** What the runner logs: it took a job (one dispatch), the job resolved, its artifact landed. */
export type RunnerEventKind = 'taken' | 'resolved' | 'artifact';

/** One entry of the runner's log. */
export interface RunnerEvent {
  readonly kind: RunnerEventKind;
  /** The invocation whose dispatch pushed the job (the job's `message`). */
  readonly invocation: string;
  /** Epoch milliseconds. */
  readonly at: number;
}

/** The runner's keys, next to the sample's under the same prefix. */
export interface RunnerKeys {
  /** Redis stream the runner appends every event to. */
  readonly log: string;
  /** Set by the runner when the job pushed by `invocation` resolves (before its artifact). */
  resolved(invocation: string): string;
}

/** The runner keys under a sample prefix. */
export function runnerKeys(keys: ChatKeys): RunnerKeys {
  return {
    log: `${keys.prefix}:runner:log`,
    resolved: (invocation) => `${keys.prefix}:runner:resolved:${encodeURIComponent(invocation)}`,
  };
}

/** How the runner behaves. */
export interface BenchRunnerOptions {
  readonly redisUrl: string;
  readonly keys: ChatKeys;
  /** How long a job runs before it resolves. */
  readonly jobMs: number;
  /** How long after resolving the job writes its artifact: the resolved-but-not-written window. */
  readonly artifactDelayMs: number;
}

/** A running bench job runner. */
export interface BenchRunner {
  /**
   * Stop taking jobs; resolves once every job already taken is in the log. The jobs themselves
   * go on running.
   */
  stopTaking(): Promise<void>;
  /** Stop taking jobs, let running ones write their artifacts, then disconnect. */
  stop(): Promise<void>;
}

/**
 * Start a runner that pops jobs from the tail of the sample's job list (BRPOP: the sample pushes
 * at the head) and runs each concurrently:
 * logs `taken`, sleeps `jobMs`, logs `resolved` and sets the resolution key, sleeps
 * `artifactDelayMs`, writes the summary artifact where the sample's `awaitSummary` reads it,
 * and logs `artifact`.
 */
export function startBenchRunner(options: BenchRunnerOptions): BenchRunner {
  const { keys } = options;
  const rkeys = runnerKeys(keys);
  const blocking = new Redis(options.redisUrl);
  const writer = new Redis(options.redisUrl);
  const running = new Set<Promise<void>>();
  const takenLogged: Promise<unknown>[] = [];
  let stopped = false;

  const log = (kind: RunnerEventKind, invocation: string) => writer.xadd(rkeys.log, '*', 'kind', kind, 'invocation', invocation, 'at', String(Date.now()));

  async function runJob(job: SummaryJob, taken: Promise<unknown>): Promise<void> {
    await taken;
    await sleep(options.jobMs);
    await writer.set(rkeys.resolved(job.message), String(Date.now()), 'PX', 600_000);
    await log('resolved', job.message);
    await sleep(options.artifactDelayMs);
    await writer.set(keys.summary(job.sessionId, job.jobType), `summary of ${job.sessionId}, from ${job.message}`, 'PX', 600_000);
    await log('artifact', job.message);
  }

  async function loop(): Promise<void> {
    while (!stopped) {
      const popped = await blocking.brpop(keys.jobs, 0.1);
      if (popped === null) continue;
      const job = JSON.parse(popped[1]) as SummaryJob;
      const taken = log('taken', job.message); // one dispatch, logged before the next pop
      takenLogged.push(taken.catch(() => undefined));
      const done = runJob(job, taken)
        .catch((err: unknown) => console.error(`bench runner: job of ${job.message} failed`, err))
        .finally(() => running.delete(done));
      running.add(done);
    }
  }

  const looping = loop().catch((err: unknown) => console.error('bench runner: stopped taking jobs', err));
  async function stopTaking(): Promise<void> {
    stopped = true;
    await looping;
    await Promise.all(takenLogged);
  }

  return {
    stopTaking,
    async stop() {
      await stopTaking();
      await Promise.all(running);
      blocking.disconnect();
      await writer.quit();
    },
  };
}

/** Read the runner's whole log, oldest first. */
export async function readRunnerLog(redis: Redis, keys: ChatKeys): Promise<RunnerEvent[]> {
  const entries = await redis.xrange(runnerKeys(keys).log, '-', '+');
  return entries.map(([, fields]) => {
    const map = new Map<string, string>();
    for (let i = 0; i + 1 < fields.length; i += 2) map.set(fields[i], fields[i + 1]);
    return { kind: map.get('kind') as RunnerEventKind, invocation: map.get('invocation') ?? '?', at: Number(map.get('at')) };
  });
}
