import { randomUUID } from 'node:crypto';
import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { NativeConnection, Worker } from '@temporalio/worker';
import { FireOnceConfigError, FireOnceGuard, FireOnceInvalidId, FireOncePlugin, fireOnce } from '../../src';
import type { Redis } from 'ioredis';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';
import { asFailure, differences, dispatchCounter, runActivity, settle, useBadInputFixture } from '../support/bystander';
import { BAD_IDS, GOOD_IDS, problemAs, type IdRow } from '../support/id-rows';

// One table of IDs (support/id-rows.ts), fed to both sides: the workflow side through a real
// workflow on the dev server that calls setDispatchScope(id), the worker side through the guard,
// fireOnce() and the activity interceptor. A bad ID is refused on every side with the same
// message and type (FireOnceInvalidId), and nothing is scheduled, dispatched or changed in Redis;
// a nasty but valid one is accepted on every side and dispatched once.
describe('bad input: one ID validation on the workflow and the worker side', () => {
  const fx = useBadInputFixture('ids-both');
  const wfPrefix = testPrefix('ids-wf');
  const taskQueue = `fire-once-ids-${randomUUID()}`;
  let native: NativeConnection;
  let connection: Connection;
  let client: Client;
  let worker: Worker;
  let running: Promise<void>;
  let wfCounter: ReturnType<typeof dispatchCounter>;
  let wfGuard: FireOnceGuard;
  let wfRedis: Redis; // the worker's own client: the fixture's closes before this file's afterAll

  beforeAll(async () => {
    native = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS });
    connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS });
    client = new Client({ connection });
    wfRedis = connectRedis();
    wfCounter = dispatchCounter(wfRedis, wfPrefix);
    const plugin = new FireOncePlugin({ redis: wfRedis, keyPrefix: wfPrefix, pollIntervalMs: 50 });
    wfGuard = plugin.guard;
    const echo = fireOnce(
      async (rowName: string) => {
        await wfCounter.hit(rowName); // counted outside the guard
        return rowName;
      },
      { jobType: 'echo' },
    );
    worker = await Worker.create({
      connection: native,
      taskQueue,
      workflowsPath: require.resolve('./fixtures/id-workflows'),
      activities: { echo },
      plugins: [plugin],
    });
    running = worker.run();
  });

  afterAll(async () => {
    worker?.shutdown();
    await running;
    await connection?.close();
    await native?.close();
    await deletePrefix(wfRedis, wfPrefix);
    await wfRedis.quit();
  });

  /** Run the fixture workflow on row `row`; its result, or the failure that ended it, and its history. */
  async function workflowSide(row: IdRow) {
    const handle = await client.workflow.start('scopeFromTable', { taskQueue, workflowId: `ids-${randomUUID()}`, args: [row.name] });
    const { value, error } = await settle(handle.result());
    const events = (await handle.fetchHistory()).events ?? [];
    return { value, error, scheduled: events.filter((e) => e.activityTaskScheduledEventAttributes).length };
  }

  /** The error `promise` rejects with, as a FireOnceInvalidId; fails the test otherwise. */
  async function invalidId(promise: Promise<unknown>): Promise<FireOnceInvalidId> {
    const { error } = await settle(promise);
    if (!(error instanceof FireOnceInvalidId)) throw new Error(`expected FireOnceInvalidId, got ${String(error)}`);
    return error;
  }

  const job = async (): Promise<string> => 'dispatched';

  it.each(BAD_IDS.map((row) => [row.name, row] as const))('%s: refused on both sides with the same message', async (_name, row) => {
    // Workflow side: setDispatchScope fails the workflow, non-retryable, before anything is scheduled.
    const wf = await workflowSide(row);
    expect(wf.error).toBeInstanceOf(WorkflowFailedError);
    const cause = (wf.error as WorkflowFailedError).cause;
    expect(cause).toBeInstanceOf(ApplicationFailure);
    expect({ type: (cause as ApplicationFailure).type, nonRetryable: (cause as ApplicationFailure).nonRetryable, message: cause?.message }).toEqual({
      type: 'FireOnceInvalidId',
      nonRetryable: true,
      message: row.problem,
    });
    expect(wf.scheduled).toBe(0);
    expect(await wfCounter.count(row.name)).toBe(0);

    // Worker side, the guard: as a scope, a step and a job type, with the kind named.
    const id = row.id as string;
    expect((await invalidId(fx.guard.acquire({ scope: id, step: 'report', jobType: 'report' }))).message).toBe(row.problem);
    if (row.id !== undefined) {
      expect((await invalidId(fx.guard.acquire({ scope: 's', step: id, jobType: 'report' }))).message).toBe(problemAs(row, 'step'));
      expect((await invalidId(fx.guard.acquire({ scope: 's', step: 'report', jobType: id }))).message).toBe(problemAs(row, 'jobType'));
      // fireOnce() refuses a bad step or job type when the worker's activities are built.
      expect(() => fireOnce(job, { step: id })).toThrow(new FireOnceConfigError(`fireOnce(job): ${problemAs(row, 'step')}`));
      expect(() => fireOnce(job, { jobType: id })).toThrow(new FireOnceConfigError(`fireOnce(job): ${problemAs(row, 'jobType')}`));
    }

    // Worker side, a guarded activity whose scope option returns the ID (undefined is a missing scope).
    const activities = {
      job: fireOnce(
        async () => {
          await fx.counter.hit();
          return 'dispatched';
        },
        { scope: () => id },
      ),
    };
    const failure = asFailure((await settle(runActivity({ config: { guard: fx.guard }, activities, activityType: 'job' }))).error);
    expect({ type: failure.type, nonRetryable: failure.nonRetryable, message: failure.message }).toEqual(
      row.id === undefined
        ? { type: 'FireOnceMissingScope', nonRetryable: true, message: expect.stringMatching(/^activity "job" has no dispatch scope/) }
        : { type: 'FireOnceInvalidId', nonRetryable: true, message: row.problem },
    );
    expect(await fx.counter.total()).toBe(0);
    expect(await differences(fx.redis, fx.before)).toEqual([]);
  });

  it.each(GOOD_IDS.map((row) => [row.name, row] as const))('%s: accepted on both sides, dispatched once', async (_name, row) => {
    const id = row.id as string;
    // Workflow side: the scope reaches the activity, which dispatches once and stores under it.
    const wf = await workflowSide(row);
    expect(wf.error).toBeUndefined();
    expect(wf.value).toBe(row.name);
    expect(await workflowSide(row)).toMatchObject({ value: row.name }); // a second run fast-forwards
    expect(await wfCounter.count(row.name)).toBe(1);
    expect(await fx.redis.exists(wfGuard.keys.artifact(id, 'echo'))).toBe(1);

    // Worker side: as scope, step and job type at once, twice: one dispatch.
    const activities = {
      job: fireOnce(
        async () => {
          await fx.counter.hit();
          return 'dispatched';
        },
        { scope: () => id, step: id, jobType: id },
      ),
    };
    for (let i = 0; i < 2; i++) await runActivity({ config: { guard: fx.guard }, activities, activityType: 'job' });
    expect(await fx.counter.total()).toBe(1);
    expect(await fx.redis.exists(fx.guard.keys.artifact(id, id))).toBe(1);
    expect(await differences(fx.redis, fx.before)).toEqual([]);
  });
});
