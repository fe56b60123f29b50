import { randomBytes } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { ActivityFailure, ApplicationFailure } from '@temporalio/common';
import { NativeConnection, type WorkflowBundle } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import { connectRedis, deletePrefix, testPrefix } from '../../test/helpers/redis';
import { bundleSampleWorkflows, quietTemporalLogs } from '../shared/temporal';
import { readCount } from '../shared/redis';
import { RENDER_FAILED, dispatchesKey } from './activities';
import { requestReport, type ReportOutcome } from './client';
import { createReportWorker } from './worker';

describe('failure-then-retry: a failed dispatch frees the step for the next run', () => {
  let redis: Redis;
  let nativeConnection: NativeConnection;
  let connection: Connection;
  let client: Client;
  let workflowBundle: WorkflowBundle;
  const prefixes: string[] = [];

  beforeAll(async () => {
    quietTemporalLogs('ERROR'); // the failed activities and runs here are expected: keep their warnings out
    redis = connectRedis();
    nativeConnection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS });
    connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS });
    client = new Client({ connection });
    workflowBundle = await bundleSampleWorkflows(require.resolve('./workflows'));
  });

  afterAll(async () => {
    for (const prefix of prefixes) await deletePrefix(redis, prefix);
    redis.disconnect();
    await connection.close();
    await nativeConnection.close();
  });

  async function startWorker(jobMs: number) {
    const prefix = testPrefix('failure-retry');
    prefixes.push(prefix);
    const taskQueue = `failure-retry-${randomBytes(4).toString('hex')}`;
    const worker = await createReportWorker({ connection: nativeConnection, redis, taskQueue, keyPrefix: prefix, failFirst: 1, jobMs, workflowBundle });
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
      expectRenderFailed(await requestReport(client, taskQueue, 'report-1'));
      expect(await readCount(redis, dispatchesKey(prefix, 'report-1'))).toBe(1);

      const second = await requestReport(client, taskQueue, 'report-1');
      expect(second).toMatchObject({ ok: true, report: { reportId: 'report-1', dispatch: 2 } });

      const later = [await requestReport(client, taskQueue, 'report-1'), await requestReport(client, taskQueue, 'report-1')];
      for (const outcome of later) expect(outcome).toEqual(second);
      expect(await readCount(redis, dispatchesKey(prefix, 'report-1'))).toBe(2);
    });
  });

  it('of two concurrent runs, the one whose dispatch fails fails, and the other dispatches again and succeeds', async () => {
    const { prefix, taskQueue, worker } = await startWorker(1_000);
    await worker.runUntil(async () => {
      const outcomes = await Promise.all([requestReport(client, taskQueue, 'report-2'), requestReport(client, taskQueue, 'report-2')]);
      const failed = outcomes.filter((outcome) => !outcome.ok);
      const succeeded = outcomes.filter((outcome) => outcome.ok);
      expect(failed).toHaveLength(1);
      expectRenderFailed(failed[0]!);
      expect(succeeded).toEqual([{ ok: true, report: expect.objectContaining({ dispatch: 2 }) }]);
      expect(await readCount(redis, dispatchesKey(prefix, 'report-2'))).toBe(2);

      expect(await requestReport(client, taskQueue, 'report-2')).toEqual(succeeded[0]);
      expect(await readCount(redis, dispatchesKey(prefix, 'report-2'))).toBe(2);
    });
  });
});
