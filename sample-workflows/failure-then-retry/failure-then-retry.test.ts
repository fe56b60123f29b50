import { ActivityFailure, ApplicationFailure } from '@temporalio/common';
import { useSampleHarness } from '../../test/support/sample-harness';
import { readCount } from '../shared/redis';
import { FireOnceKeys } from '../../src/core';
import { RENDER_FAILED, REPORT_JOB, dispatchesKey } from './activities';
import { requestReport, type ReportOutcome } from './client';
import { createReportWorker } from './worker';

describe('failure-then-retry: a failed dispatch frees the step for the next run', () => {
  // The failed activities and runs here are expected: keep their warnings out.
  const h = useSampleHarness('failure-retry', require.resolve('./workflows'), 'ERROR');

  async function startWorker(jobMs: number) {
    const { prefix, taskQueue, worker: base } = h.fresh();
    const worker = await createReportWorker({ ...base, failFirst: 1, jobMs });
    return { prefix, taskQueue, worker };
  }

  function expectRenderFailed(outcome: ReportOutcome): void {
    expect(outcome.ok).toBe(false);
    if (outcome.ok) return;
    expect(outcome.error.cause).toBeInstanceOf(ActivityFailure);
    const root = outcome.error.cause?.cause;
    expect(root).toBeInstanceOf(ApplicationFailure);
    expect((root as ApplicationFailure).type).toBe(RENDER_FAILED);
  }

  it('fails the first run, dispatches again on the next, and fast-forwards every later run', async () => {
    const { prefix, taskQueue, worker } = await startWorker(200);
    await worker.runUntil(async () => {
      expectRenderFailed(await requestReport(h.client, taskQueue, 'report-1'));
      expect(await readCount(h.redis, dispatchesKey(prefix, 'report-1'))).toBe(1);

      const second = await requestReport(h.client, taskQueue, 'report-1');
      expect(second).toMatchObject({ ok: true, report: { reportId: 'report-1', dispatch: 2 } });
      // The commit replaced the lock with the result: the result alone stops the later runs.
      const keys = new FireOnceKeys(prefix);
      expect(await h.redis.exists(keys.lock('report-1', 'renderReport'))).toBe(0);
      expect(await h.redis.exists(keys.artifact('report-1', REPORT_JOB))).toBe(1);

      const later = [await requestReport(h.client, taskQueue, 'report-1'), await requestReport(h.client, taskQueue, 'report-1')];
      for (const outcome of later) expect(outcome).toEqual(second);
      expect(await readCount(h.redis, dispatchesKey(prefix, 'report-1'))).toBe(2);
    });
  });

  it('of two concurrent runs, the one whose dispatch fails fails, and the other dispatches again and succeeds', async () => {
    const { prefix, taskQueue, worker } = await startWorker(1_000);
    await worker.runUntil(async () => {
      const outcomes = await Promise.all([requestReport(h.client, taskQueue, 'report-2'), requestReport(h.client, taskQueue, 'report-2')]);
      const failed = outcomes.filter((outcome) => !outcome.ok);
      const succeeded = outcomes.filter((outcome) => outcome.ok);
      expect(failed).toHaveLength(1);
      expectRenderFailed(failed[0]!);
      expect(succeeded).toEqual([{ ok: true, report: expect.objectContaining({ dispatch: 2 }) }]);
      expect(await readCount(h.redis, dispatchesKey(prefix, 'report-2'))).toBe(2);

      expect(await requestReport(h.client, taskQueue, 'report-2')).toEqual(succeeded[0]);
      expect(await readCount(h.redis, dispatchesKey(prefix, 'report-2'))).toBe(2);
    });
  });
});
