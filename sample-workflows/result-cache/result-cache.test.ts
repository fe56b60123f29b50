import { FireOnceKeys } from '../../src/core';
import { useSampleHarness } from '../../test/support/sample-harness';
import { readCount } from '../shared/redis';
import { SUMMARY_JOB, dispatchesKey } from './activities';
import { requestSummaries } from './client';
import { createSummaryWorker } from './worker';

describe('result-cache: the guard stores the result and hands it to every run', () => {
  const h = useSampleHarness('result-cache', require.resolve('./workflows'));

  it('concurrent runs wait for the one dispatch and later runs fast-forward to the same result', async () => {
    const { prefix, taskQueue, worker: base } = h.fresh();
    const worker = await createSummaryWorker({ ...base, jobMs: 1_500 });

    await worker.runUntil(async () => {
      const concurrent = await requestSummaries(h.client, { taskQueue, sessionId: 'session-1', invocations: 6, spacingMs: 10 });
      expect(await readCount(h.redis, dispatchesKey(prefix, 'session-1'))).toBe(1);
      const [first] = concurrent;
      expect(first).toMatchObject({ sessionId: 'session-1', dispatch: 1 });
      for (const summary of concurrent) expect(summary).toEqual(first);

      // The commit replaced the lock with the result: the stored result alone stops a re-run.
      const keys = new FireOnceKeys(prefix);
      expect(await h.redis.exists(keys.lock('session-1', 'summarizeSession'))).toBe(0);
      expect(await h.redis.exists(keys.artifact('session-1', SUMMARY_JOB))).toBe(1);
      const later = await requestSummaries(h.client, { taskQueue, sessionId: 'session-1', invocations: 2 });
      for (const summary of later) expect(summary).toEqual(first);

      expect(await readCount(h.redis, dispatchesKey(prefix, 'session-1'))).toBe(1);
    });
  });

  it('keeps sessions apart: another session dispatches its own job', async () => {
    const { prefix, taskQueue, worker: base } = h.fresh();
    const worker = await createSummaryWorker({ ...base, jobMs: 300 });

    await worker.runUntil(async () => {
      const [a, b] = await Promise.all([
        requestSummaries(h.client, { taskQueue, sessionId: 'session-a', invocations: 3 }),
        requestSummaries(h.client, { taskQueue, sessionId: 'session-b', invocations: 3 }),
      ]);
      expect(new Set(a.map((s) => s.jobId)).size).toBe(1);
      expect(new Set(b.map((s) => s.jobId)).size).toBe(1);
      expect(a[0]!.jobId).not.toBe(b[0]!.jobId);
      // Each session's job is its first dispatch, as step 4 of the README prints ("dispatch":1).
      expect([a[0]!.dispatch, b[0]!.dispatch]).toEqual([1, 1]);
      expect(await readCount(h.redis, dispatchesKey(prefix, 'session-a'))).toBe(1);
      expect(await readCount(h.redis, dispatchesKey(prefix, 'session-b'))).toBe(1);
    });
  });
});
