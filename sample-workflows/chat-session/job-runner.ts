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
  /**
   * Names the list of the jobs this runner has taken and not finished (`keys.processing(runnerId)`).
   * A runner started under the ID of one that died runs those jobs first. @defaultValue `'runner-1'`
   */
  readonly runnerId?: string;
}

/** A running job runner. */
export interface JobRunner {
  /** Stop taking jobs, let the running ones finish and write their artifacts, then disconnect. */
  stop(): Promise<void>;
}

/**
 * The downstream service the chat step dispatches to, outside Temporal: it takes summary jobs
 * from a Redis list and runs each concurrently. A job takes `jobMs`, then resolves, and only
 * `artifactDelayMs` later writes its artifact. A run that lands in that gap finds no artifact;
 * only the still-held lock keeps it from dispatching again.
 *
 * Taking a job moves it, in one step, onto this runner's own processing list (`BRPOPLPUSH`,
 * which Redis 5 has; `BLMOVE` needs 6.2), and the job leaves that list only once its artifact is
 * written. A runner that dies mid-job loses nothing: the next one started under its `runnerId`
 * runs what it left there. With `BLPOP` such a job was gone, and once the lock's TTL ran out the
 * next message dispatched it again.
 */
export function startJobRunner(options: JobRunnerOptions): JobRunner {
  const { keys } = options;
  const processing = keys.processing(options.runnerId ?? 'runner-1');
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

  /** Run a job taken onto the processing list; it leaves the list once its artifact is written. */
  function start(taken: string): void {
    const job = JSON.parse(taken) as SummaryJob;
    const done = runJob(job)
      .then(async () => void (await writer.lrem(processing, 1, taken)))
      .catch((err: unknown) => console.error(`job runner: job from dispatch #${job.dispatch} failed; left on ${processing}`, err))
      .finally(() => running.delete(done));
    running.add(done);
  }

  async function loop(): Promise<void> {
    // What a runner of this ID took and never finished: it died. Run those first.
    for (const taken of await writer.lrange(processing, 0, -1)) start(taken);
    while (!stopped) {
      // Whole seconds: Redis before 6.0 refuses a fractional timeout. stop() waits for it.
      const taken = await blocking.brpoplpush(keys.jobs, processing, 1);
      if (taken !== null) start(taken);
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
    const runnerId = process.env.RUNNER_ID ?? 'runner-1';
    const runner = startJobRunner({ redisUrl: redisUrl(), keys, ...timings, runnerId, log: (line) => console.log(line) });
    console.log(
      `job runner ${runnerId}: taking jobs from ${keys.jobs} onto ${keys.processing(runnerId)} (job ${timings.jobMs} ms, artifact ${timings.artifactDelayMs} ms later); Ctrl-C to stop`,
    );
    await new Promise<void>((resolve) => process.once('SIGINT', resolve));
    await runner.stop();
  });
}
