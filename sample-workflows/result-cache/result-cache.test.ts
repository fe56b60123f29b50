import { FireOnceKeys } from '../../src/core';
import { useSampleHarness } from '../../test/support/sample-harness';
import { readCount } from '../shared/redis';
import { dispatchesKey } from './activities';
import { requestSummaries } from './client';
import { createSummaryWorker } from './worker';

describe('result-cache: the guard stores the result and hands it to every run', () => {
  const h = useSampleHarness('result-cache', require.resolve('./workflows'));

  it('concurrent runs wait for the one dispatch and later runs fast-forward to the same result', async () => {
    const { prefix, taskQueue, worker: base } = h.fresh();
    const worker = await createSummaryWorker({ ...base, jobMs: 1_500 });

    await worker.runUntil(async () => {
      const concurrent = await requestSummaries(h.client, { taskQueue, sessionId: 'session-1', invocations: 6, spacingMs: 10 });
      expect(await readCount(h.redis, dispatchesKey(prefix))).toBe(1);
      const [first] = concurrent;
      expect(first).toMatchObject({ sessionId: 'session-1', dispatch: 1 });
      for (const summary of concurrent) expect(summary).toEqual(first);

      const later = await requestSummaries(h.client, { taskQueue, sessionId: 'session-1', invocations: 2 });
      for (const summary of later) expect(summary).toEqual(first);

      // Once the lock has run out, the stored result alone still stops a re-run.
      await h.redis.del(new FireOnceKeys(prefix).lock('session-1', 'summarizeSession'));
      const [afterLock] = await requestSummaries(h.client, { taskQueue, sessionId: 'session-1', invocations: 1 });
      expect(afterLock).toEqual(first);

      expect(await readCount(h.redis, dispatchesKey(prefix))).toBe(1);
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
      expect(await readCount(h.redis, dispatchesKey(prefix))).toBe(2);
    });
  });
});
