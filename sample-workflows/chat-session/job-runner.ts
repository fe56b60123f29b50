import { randomUUID } from 'node:crypto';
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
  /**
   * Runs a job gets: one whose run fails goes back on the queue for another, and after this many
   * onto the dead-letter list `keys.deadJobs`. @defaultValue 3
   */
  readonly maxAttempts?: number;
}

/** A running job runner. */
export interface JobRunner {
  /**
   * Resolves once the runner holds its `runnerId`; rejects if another live runner holds it (then
   * the runner takes no job: it would run that runner's jobs a second time).
   */
  readonly started: Promise<void>;
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
 * next message dispatched it again. A job whose run fails leaves the list in one step too: back
 * on the queue, or after `maxAttempts` runs onto the dead-letter list, where an operator finds it.
 */
export function startJobRunner(options: JobRunnerOptions): JobRunner {
  const { keys } = options;
  const runnerId = options.runnerId ?? 'runner-1';
  const processing = keys.processing(runnerId);
  const maxAttempts = options.maxAttempts ?? 3;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) throw new Error(`maxAttempts must be a positive integer (got ${maxAttempts})`);
  const report = options.log ?? ((line: string) => console.error(`job runner: ${line}`));
  const claimKey = `${processing}:claim`;
  const claimToken = randomUUID();
  let renewing: NodeJS.Timeout | undefined;
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

  /**
   * Run a job taken onto the processing list; it leaves the list once its artifact is written, or
   * once its run failed (see {@link putBack}). If Redis refuses that, it stays there, and a
   * runner restarted under this ID runs it.
   */
  function start(taken: string): void {
    const job = readJob(taken);
    const settled =
      job === undefined
        ? unreadable(taken)
        : runJob(job).then(
            () => writer.lrem(processing, 1, taken),
            (err: unknown) => putBack(taken, job, err),
          );
    const done = settled
      .then(
        () => undefined,
        (err: unknown) => console.error(`job runner: job ${taken} could not leave ${processing}; left there`, err),
      )
      .finally(() => running.delete(done));
    running.add(done);
  }

  /** A job this runner cannot read goes straight to the dead-letter list: run, it would stop the runner. */
  async function unreadable(taken: string): Promise<void> {
    report(`job ${JSON.stringify(taken)} cannot be read (not a JSON object); moved to ${keys.deadJobs}`);
    await writer.eval(MOVE_IF_OURS, 2, processing, keys.deadJobs, taken, taken);
  }

  /**
   * A job whose run failed moves, in one step, from the processing list back onto the queue (at
   * the head: the end of the line) with its attempt counted, or after `maxAttempts` runs onto the
   * dead-letter list. Left on the processing list, it waited for a runner of this ID to restart.
   */
  async function putBack(taken: string, job: SummaryJob, err: unknown): Promise<void> {
    const attempt = job.attempt ?? 1;
    const retry = attempt < maxAttempts;
    const to = retry ? keys.jobs : keys.deadJobs;
    const reason = err instanceof Error ? err.message : String(err);
    report(`job from dispatch #${job.dispatch} failed (attempt ${attempt} of ${maxAttempts}): ${reason}; ${retry ? 'put back on' : 'moved to'} ${to}`);
    await writer.eval(MOVE_IF_OURS, 2, processing, to, taken, JSON.stringify({ ...job, attempt: retry ? attempt + 1 : attempt }));
  }

  /**
   * Hold the runner ID while running: a second runner started under a live runner's ID would run
   * that runner's jobs again from its processing list. A dead runner's claim lapses within
   * CLAIM_TTL_MS, so one restarted under its ID waits that long at most, then takes over.
   */
  async function claim(): Promise<void> {
    const deadline = Date.now() + CLAIM_TTL_MS + 2_000;
    while ((await writer.set(claimKey, claimToken, 'PX', CLAIM_TTL_MS, 'NX')) === null) {
      if (Date.now() > deadline) {
        throw new Error(`job runner: runner ID ${JSON.stringify(runnerId)} is held by a live runner (${claimKey}): start each runner with its own RUNNER_ID`);
      }
      await sleep(250);
    }
    renewing = setInterval(() => {
      void (writer.eval(IF_OURS_PEXPIRE, 1, claimKey, claimToken, CLAIM_TTL_MS) as Promise<number>).then(
        (held) => held === 1 || console.error(`job runner: lost the claim on ${JSON.stringify(runnerId)} (${claimKey} expired)`),
        () => undefined,
      );
    }, CLAIM_TTL_MS / 3);
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

  const started = claim();
  const looping = started.then(loop).catch((err: unknown) => console.error('job runner: stopped taking jobs', err));
  return {
    started,
    async stop() {
      stopped = true;
      await looping;
      await Promise.all(running);
      clearInterval(renewing);
      if (renewing !== undefined) await writer.eval(IF_OURS_DEL, 1, claimKey, claimToken);
      blocking.disconnect();
      await writer.quit();
    },
  };
}

/** The job `taken` holds, or undefined when it is no JSON object. */
function readJob(taken: string): SummaryJob | undefined {
  try {
    const job: unknown = JSON.parse(taken);
    return job !== null && typeof job === 'object' && !Array.isArray(job) ? (job as SummaryJob) : undefined;
  } catch {
    return undefined;
  }
}

/** How long a runner's claim on its ID outlives its last renewal (renewed three times as often). */
const CLAIM_TTL_MS = 5_000;
const IF_OURS_PEXPIRE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0";
/** Move ARGV[1] off the processing list KEYS[1], as ARGV[2], onto the head of KEYS[2]; nothing if it is not there. */
const MOVE_IF_OURS = "if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 1 then return redis.call('LPUSH', KEYS[2], ARGV[2]) end return 0";
const IF_OURS_DEL = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

if (require.main === module) {
  runMain(async () => {
    const timings = {
      jobMs: intFromEnv('JOB_MS', DEFAULT_TIMINGS.jobMs),
      artifactDelayMs: intFromEnv('ARTIFACT_DELAY_MS', DEFAULT_TIMINGS.artifactDelayMs),
    };
    const keys = chatKeys(process.env.KEY_PREFIX ?? DEFAULT_KEY_PREFIX);
    const runnerId = process.env.RUNNER_ID ?? 'runner-1';
    const maxAttempts = intFromEnv('MAX_ATTEMPTS', 3);
    const runner = startJobRunner({ redisUrl: redisUrl(), keys, ...timings, runnerId, maxAttempts, log: (line) => console.log(line) });
    await runner.started.catch(async (err: unknown) => {
      await runner.stop();
      throw err;
    });
    console.log(
      `job runner ${runnerId}: taking jobs from ${keys.jobs} onto ${keys.processing(runnerId)} (job ${timings.jobMs} ms, artifact ${timings.artifactDelayMs} ms later); Ctrl-C to stop`,
    );
    await new Promise<void>((resolve) => process.once('SIGINT', resolve));
    await runner.stop();
  });
}
