import { useSampleHarness } from '../../test/support/sample-harness';
import { startScript } from '../../test/support/scripts';
import { readCount, waitForCount, waitUntil } from '../shared/redis';
import { FireOnceKeys, parseEvent } from '../../src/core';
import { DISPATCH_STEP, chatKeys, type JobTimings } from './config';
import { startJobRunner } from './job-runner';
import { createChatWorker } from './worker';
import { sendBurst, sendMessage, type Strategy } from './client';
import { chatTurn } from './workflows';

const BURST = 8;

describe('chat-session: every message is a new run of the same session', () => {
  const h = useSampleHarness('chat', require.resolve('./workflows'));

  /** A worker and a job runner on a fresh prefix and task queue, for the length of `scenario`. */
  async function withSample<T>(timings: JobTimings, scenario: (ctx: { prefix: string; taskQueue: string }) => Promise<T>): Promise<T> {
    const { prefix, taskQueue, worker: base } = h.fresh();
    const worker = await createChatWorker({ ...base, timings });
    const runner = startJobRunner({ redisUrl: process.env.REDIS_URL!, keys: chatKeys(prefix), ...timings });
    try {
      return await worker.runUntil(scenario({ prefix, taskQueue }));
    } finally {
      await runner.stop();
    }
  }

  /** The guard's decision for the dispatch of one run, from the dispatch log (flushed in batches). */
  async function decisionOf(prefix: string, workflowId: string): Promise<string> {
    let decision: string | undefined;
    await waitUntil(`the dispatch log to record ${workflowId}`, async () => {
      const entries = await h.redis.xrange(new FireOnceKeys(prefix).log(), '-', '+');
      decision = entries.map(([, fields]) => parseEvent(fields)).find((event) => event.workflowId === workflowId)?.decision;
      return decision !== undefined;
    });
    return decision!;
  }

  function burst(strategy: Strategy, prefix: string, taskQueue: string, sessionId: string): Promise<string[]> {
    return sendBurst(h.client, {
      taskQueue,
      sessionId,
      strategy,
      redis: h.redis,
      keys: chatKeys(prefix),
      invocations: BURST,
      spacingMs: 7,
    });
  }

  it('guarded: a burst of runs while the job is in flight dispatches it once, and every run gets its summary', async () => {
    await withSample({ jobMs: 1_500, artifactDelayMs: 300 }, async ({ prefix, taskQueue }) => {
      const results = await burst('guarded', prefix, taskQueue, 'session-burst');
      expect(await readCount(h.redis, chatKeys(prefix).dispatches)).toBe(1);
      expect(new Set(results)).toEqual(new Set(['summary of session-burst, from dispatch #1 ("message 1")']));
    });
  });

  it("unguarded: the same burst dispatches the job once per run (the seed's bug)", async () => {
    await withSample({ jobMs: 1_500, artifactDelayMs: 300 }, async ({ prefix, taskQueue }) => {
      const results = await burst('unguarded', prefix, taskQueue, 'session-burst');
      expect(results).toHaveLength(BURST);
      expect(await readCount(h.redis, chatKeys(prefix).dispatches)).toBe(BURST);
    });
  });

  it('guarded: a run landing after the job resolved but before its artifact is written does not dispatch again', async () => {
    await withSample({ jobMs: 500, artifactDelayMs: 3_000 }, async ({ prefix, taskQueue }) => {
      const keys = chatKeys(prefix);
      const first = await sendMessage(h.client, { taskQueue, sessionId: 'session-gap', strategy: 'guarded', text: 'first' });
      await waitForCount(h.redis, keys.jobsResolved, 1);
      expect(await h.redis.exists(keys.summary('session-gap'))).toBe(0); // inside the gap
      const inGap = await sendMessage(h.client, { taskQueue, sessionId: 'session-gap', strategy: 'guarded', text: 'in the gap' });
      const results = await Promise.all([first.result(), inGap.result()]);
      expect(results[1]).toBe(results[0]);
      expect(await readCount(h.redis, keys.dispatches)).toBe(1);
      // It did land in the gap: it found the lock held and skipped, rather than arriving after the
      // artifact was written and fast-forwarding.
      expect(await decisionOf(prefix, inGap.workflowId)).toBe('in-flight-skipped');
    });
  });

  it('guarded: a run after the artifact exists fast-forwards, even once the lock has gone', async () => {
    await withSample({ jobMs: 200, artifactDelayMs: 100 }, async ({ prefix, taskQueue }) => {
      const keys = chatKeys(prefix);
      const message = { taskQueue, sessionId: 'session-later', strategy: 'guarded' as const };
      const first = await (await sendMessage(h.client, { ...message, text: 'first' })).result();
      // The lock outlived the success (held for lockTtlMs); delete it, as if its TTL had run out.
      expect(await h.redis.del(new FireOnceKeys(prefix).lock('session-later', DISPATCH_STEP))).toBe(1);
      const laterHandle = await sendMessage(h.client, { ...message, text: 'later' });
      const later = await laterHandle.result();
      expect(later).toBe(first);
      expect(await readCount(h.redis, keys.dispatches)).toBe(1);
      expect(await decisionOf(prefix, laterHandle.workflowId)).toBe('fast-forwarded');
    });
  });
  it('guarded: a job runner killed mid-job loses nothing: one restarted under its ID runs the job, and the run gets its summary', async () => {
    // The lock lasts the 60 s job's life and more, so the run's wait (60 s) is what a lost job
    // would fail at; nobody dispatches again meanwhile.
    const { prefix, taskQueue, worker: base } = h.fresh();
    const keys = chatKeys(prefix);
    const worker = await createChatWorker({ ...base, timings: { jobMs: 60_000, artifactDelayMs: 0 } });
    await worker.runUntil(async () => {
      const run = await sendMessage(h.client, { taskQueue, sessionId: 'session-crash', strategy: 'guarded', text: 'first' });
      const env = { REDIS_URL: process.env.REDIS_URL!, KEY_PREFIX: prefix, JOB_MS: '60000', RUNNER_ID: 'runner-a' };
      const doomed = startScript('sample-workflows/chat-session/job-runner.ts', [], env);
      try {
        await doomed.waitFor('job from dispatch #1 started for session-crash');
      } finally {
        const killed = new Promise((resolve) => doomed.child.once('close', resolve));
        doomed.child.kill('SIGKILL'); // no shutdown: the job it took is left half done
        await killed;
      }
      const runner = startJobRunner({ redisUrl: process.env.REDIS_URL!, keys, jobMs: 100, artifactDelayMs: 0, runnerId: 'runner-a' });
      try {
        expect(await run.result()).toBe('summary of session-crash, from dispatch #1 ("first")');
      } finally {
        await runner.stop();
      }
      expect(await readCount(h.redis, keys.dispatches)).toBe(1);
      expect(await h.redis.llen(keys.processing('runner-a'))).toBe(0);
    });
  });

  it("a second job runner started under a live runner's ID takes no job, so the live runner's job runs once", async () => {
    const keys = chatKeys(h.fresh().prefix);
    const job = { sessionId: 'session-twin', jobType: 'summary', dispatch: 1, message: 'hello' };
    const first = startJobRunner({ redisUrl: process.env.REDIS_URL!, keys, jobMs: 9_000, artifactDelayMs: 0, runnerId: 'twin' });
    try {
      await first.started;
      await h.redis.lpush(keys.jobs, JSON.stringify(job));
      await waitUntil('the first runner to take the job', async () => (await h.redis.llen(keys.processing('twin'))) === 1);
      const second = startJobRunner({ redisUrl: process.env.REDIS_URL!, keys, jobMs: 0, artifactDelayMs: 0, runnerId: 'twin' });
      await expect(second.started).rejects.toThrow('runner ID "twin" is held by a live runner');
      await second.stop();
    } finally {
      await first.stop();
    }
    expect(await readCount(h.redis, keys.jobsResolved)).toBe(1);
  });

  // A job whose run fails (here its INCR of jobsResolved, which holds no number) must not stay on
  // the processing list until a runner of its ID restarts: it goes back on the queue, and after
  // maxAttempts runs onto the dead-letter list.
  async function failingJob(onFailure: (line: string) => void = () => undefined) {
    const keys = chatKeys(h.fresh().prefix);
    await h.redis.set(keys.jobsResolved, 'not a number');
    const log = (line: string) => void (line.includes(' failed') && onFailure(line));
    const runner = startJobRunner({ redisUrl: process.env.REDIS_URL!, keys, jobMs: 0, artifactDelayMs: 0, runnerId: 'failing', log });
    await runner.started;
    await h.redis.lpush(keys.jobs, JSON.stringify({ sessionId: 'session-fail', jobType: 'summary', dispatch: 1, message: 'hello' }));
    return { keys, runner };
  }

  it('a job whose run failed goes back on the queue and runs again, not left on the processing list', async () => {
    const failures: string[] = [];
    const { keys, runner } = await failingJob((line) => {
      failures.push(line);
      void h.redis.del(keys.jobsResolved); // mended before the job is put back: its next run succeeds
    });
    try {
      await waitUntil('the retried job to write its summary', async () => (await h.redis.exists(keys.summary('session-fail'))) === 1);
    } finally {
      await runner.stop();
    }
    expect(failures).toEqual([expect.stringMatching(/^job from dispatch #1 failed \(attempt 1 of 3\): .*; put back on /)]);
    expect(await readCount(h.redis, keys.jobsResolved)).toBe(1);
    expect([await h.redis.llen(keys.processing('failing')), await h.redis.llen(keys.jobs), await h.redis.llen(keys.deadJobs)]).toEqual([0, 0, 0]);
  });

  it('a job that fails every run ends on the dead-letter list after maxAttempts, and nowhere else', async () => {
    const failures: string[] = [];
    const { keys, runner } = await failingJob((line) => failures.push(line));
    try {
      await waitUntil('the job to reach the dead-letter list', async () => (await h.redis.llen(keys.deadJobs)) === 1);
    } finally {
      await runner.stop();
    }
    expect(failures).toHaveLength(3);
    expect(failures[2]).toMatch(/^job from dispatch #1 failed \(attempt 3 of 3\): .*; moved to .*:jobs:dead$/);
    expect(JSON.parse((await h.redis.lindex(keys.deadJobs, 0))!)).toMatchObject({ sessionId: 'session-fail', dispatch: 1, attempt: 3 });
    expect([await h.redis.llen(keys.processing('failing')), await h.redis.llen(keys.jobs)]).toEqual([0, 0]);
    expect(await h.redis.exists(keys.summary('session-fail'))).toBe(0);
  });

  // A job the runner cannot read (here not JSON) must not stop the runner: before the fix the
  // parse threw in its loop, it took no job again, and one restarted under its ID stopped the same
  // way on the job left on its processing list.
  it('a job the runner cannot read goes to the dead-letter list, and the jobs behind it still run', async () => {
    const keys = chatKeys(h.fresh().prefix);
    const failures: string[] = [];
    const runner = startJobRunner({
      redisUrl: process.env.REDIS_URL!,
      keys,
      jobMs: 0,
      artifactDelayMs: 0,
      runnerId: 'garbled',
      log: (l) => void failures.push(l),
    });
    await runner.started;
    // The runner takes from the tail: the garbled job first, then the good one.
    await h.redis.lpush(keys.jobs, 'not json', JSON.stringify({ sessionId: 'session-after', jobType: 'summary', dispatch: 2, message: 'hello' }));
    try {
      await waitUntil('the job behind the garbled one to write its summary', async () => (await h.redis.exists(keys.summary('session-after'))) === 1, 10_000);
    } finally {
      await runner.stop();
    }
    expect(await readCount(h.redis, keys.jobsResolved)).toBe(1);
    expect(await h.redis.lrange(keys.deadJobs, 0, -1)).toEqual(['not json']);
    expect([await h.redis.llen(keys.processing('garbled')), await h.redis.llen(keys.jobs)]).toEqual([0, 0]);
    expect(failures.filter((l) => l.includes('cannot be read'))).toHaveLength(1);
  });

  it('a run cancelled while it waits for its summary ends once the wait has stopped, by the cancellation, not at its deadline', async () => {
    // No job runner: the summary never comes, and the run waits for it (20 s at most).
    const { prefix, taskQueue, worker: base } = h.fresh();
    const worker = await createChatWorker({ ...base, timings: { jobMs: 500, artifactDelayMs: 0 } });
    await worker.runUntil(async () => {
      const handle = await h.client.workflow.start(chatTurn, {
        taskQueue,
        workflowId: `session-cancel-${Date.now()}`,
        args: [{ sessionId: 'session-cancel', message: 'hello', summaryTimeoutMs: 20_000 }],
      });
      await waitUntil('the wait for the summary to start', async () => {
        const pending = (await handle.describe()).raw.pendingActivities ?? [];
        return pending.some((a) => a.activityType?.name === 'awaitSummary' && a.attempt === 1 && a.lastStartedTime != null);
      });
      await handle.cancel();
      await expect(handle.result()).rejects.toThrow();
      // The wait heard of the cancellation with a heartbeat and stopped: the history has its
      // cancellation, where a wait that never heard of it failed at its deadline (SummaryTimeout).
      const events = (await handle.fetchHistory()).events ?? [];
      expect(events.some((e) => e.activityTaskCanceledEventAttributes)).toBe(true);
      expect(events.some((e) => e.activityTaskFailedEventAttributes)).toBe(false);
    });
    expect(await readCount(h.redis, chatKeys(prefix).dispatches)).toBe(1);
  });
});
