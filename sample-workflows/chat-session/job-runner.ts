import { Redis } from 'ioredis';
import { DEFAULT_KEY_PREFIX, DEFAULT_TIMINGS, chatKeys, type ChatKeys, type JobTimings } from './config';
import type { SummaryJob } from './activities';
import { intFromEnv, redisUrl, runMain } from '../shared/env';
import { sleep } from '../shared/redis';

/** Where the job runner reads jobs and writes artifacts, and how slow it is. */
export interface JobRunnerOptions extends JobTimings {
  readonly redisUrl: string;
  readonly keys: ChatKeys;
  /** TTL of the summary artifacts it writes. @defaultValue one day */
  readonly artifactTtlMs?: number;
  /** Told about each job as it starts and as its artifact lands. @defaultValue silent */
  readonly log?: (line: string) => void;
}

/** A running job runner. */
export interface JobRunner {
  /** Stop taking jobs, let the running ones finish and write their artifacts, then disconnect. */
  stop(): Promise<void>;
}

/**
 * The downstream service the chat step dispatches to, outside Temporal: it pops summary jobs
 * from a Redis list with BLPOP and runs each concurrently. A job takes `jobMs`, then resolves,
 * and only `artifactDelayMs` later writes its artifact. A run that lands in that gap finds no
 * artifact; only the still-held lock keeps it from dispatching again.
 */
export function startJobRunner(options: JobRunnerOptions): JobRunner {
  const { keys } = options;
  const blocking = new Redis(options.redisUrl);
  const writer = new Redis(options.redisUrl);
  const running = new Set<Promise<void>>();
  let stopped = false;

  async function runJob(job: SummaryJob): Promise<void> {
    options.log?.(`job from dispatch #${job.dispatch} started for ${job.sessionId}`);
    await sleep(options.jobMs);
    await writer.incr(keys.jobsResolved); // the job has resolved; its artifact is not written yet
    await sleep(options.artifactDelayMs);
    const summary = `summary of ${job.sessionId}, from dispatch #${job.dispatch} ("${job.message}")`;
    await writer.set(keys.summary(job.sessionId, job.jobType), summary, 'PX', options.artifactTtlMs ?? 86_400_000);
    options.log?.(`job from dispatch #${job.dispatch} wrote ${keys.summary(job.sessionId, job.jobType)}`);
  }

  async function loop(): Promise<void> {
    while (!stopped) {
      // Whole seconds: Redis before 6.0 refuses a fractional BLPOP timeout. stop() waits for it.
      const popped = await blocking.blpop(keys.jobs, 1);
      if (popped === null) continue;
      const job = JSON.parse(popped[1]) as SummaryJob;
      const done = runJob(job)
        .catch((err: unknown) => console.error(`job runner: job from dispatch #${job.dispatch} failed`, err))
        .finally(() => running.delete(done));
      running.add(done);
    }
  }

  const looping = loop().catch((err: unknown) => console.error('job runner: stopped taking jobs', err));
  return {
    async stop() {
      stopped = true;
      await looping;
      await Promise.all(running);
      blocking.disconnect();
      await writer.quit();
    },
  };
}

if (require.main === module) {
  runMain(async () => {
    const timings = {
      jobMs: intFromEnv('JOB_MS', DEFAULT_TIMINGS.jobMs),
      artifactDelayMs: intFromEnv('ARTIFACT_DELAY_MS', DEFAULT_TIMINGS.artifactDelayMs),
    };
    const keys = chatKeys(process.env.KEY_PREFIX ?? DEFAULT_KEY_PREFIX);
    const runner = startJobRunner({ redisUrl: redisUrl(), keys, ...timings, log: (line) => console.log(line) });
    console.log(`job runner: popping ${keys.jobs} (job ${timings.jobMs} ms, artifact ${timings.artifactDelayMs} ms later); Ctrl-C to stop`);
    await new Promise<void>((resolve) => process.once('SIGINT', resolve));
    await runner.stop();
  });
}
