import { randomUUID } from 'node:crypto';
import { ActivityFailure, ApplicationFailure, Client, WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { FireOncePlugin } from '../../src';
import { SCOPE_HEADER } from '../../src/workflow';
import { waitFor } from '../support/wait';
import { guardedActivities } from './fixtures/activities';
import { useFeatures } from '../support/features';
import { SCOPE_HEADER_ROWS, scopeHeaderPayload, scopeHeaderRow, type ScopeHeaderRow } from '../support/scope-headers';
import { FireOnceKeys } from '../../src/core';

// The scope header as another party wrote it: a client that starts a workflow with it, or another
// interceptor that sets it on an activity. Every row of test/conformance/scope-headers.json (which
// python/tests/test_workflow_scope.py runs too): a header that is no json/plain string is ignored,
// as PROTOCOL.md section 10 says; a string that is no valid scope fails the workflow (or the
// activity) with the non-retryable FireOnceInvalidId. Never a workflow task failure, which
// Temporal retries for ever.
describe('Temporal features: a scope header written by someone else', () => {
  const { harness, withWorker, context } = useFeatures('hdr');
  const rows = SCOPE_HEADER_ROWS.map((row) => [row.name, row] as const);

  /** Wait until the run closes or fails a workflow task; its outcome and its workflow task failures. */
  async function settleRun(handle: WorkflowHandle) {
    const taskFailures = async () => {
      const events = (await handle.fetchHistory()).events ?? [];
      return events.flatMap((e) => (e.workflowTaskFailedEventAttributes ? [e.workflowTaskFailedEventAttributes.failure?.message] : []));
    };
    let closed = false;
    const result = handle.result().then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
    void result.then(() => (closed = true));
    await waitFor(`${handle.workflowId} to close or fail a workflow task`, async () => closed || (await taskFailures()).length > 0);
    const failures = await taskFailures();
    if (!closed) await handle.terminate('a workflow task failed');
    return { outcome: closed ? await result : undefined, taskFailures: failures };
  }

  /** `{ type, nonRetryable, message }` of the ApplicationFailure at the end of `error`'s causes. */
  function failureOf(error: unknown) {
    let cause = error;
    while (cause instanceof WorkflowFailedError || cause instanceof ActivityFailure) cause = cause.cause;
    if (!(cause instanceof ApplicationFailure)) throw new Error(`expected an ApplicationFailure, got ${String(cause)}`);
    return { type: cause.type, nonRetryable: cause.nonRetryable, message: cause.message };
  }

  const expected = (row: ScopeHeaderRow, read: unknown, missing: unknown) =>
    row.invalid !== undefined ? { error: { type: 'FireOnceInvalidId', nonRetryable: true, message: row.invalid } } : row.scope === null ? missing : read;

  it.each(rows)('started by a client with %s: the workflow reads it as the row says, never failing its task', (_name, row) =>
    withWorker(async (ctx) => {
      const forging = new Client({
        connection: harness.client.connection,
        interceptors: { workflow: [{ start: (input, next) => next({ ...input, headers: { ...input.headers, [SCOPE_HEADER]: scopeHeaderPayload(row) } }) }] },
      });
      const handle = await forging.workflow.start('inheritedScopeRun', { taskQueue: ctx.taskQueue, workflowId: `hdr-${randomUUID()}`, args: [] });
      const { outcome, taskFailures } = await settleRun(handle);
      expect(taskFailures).toEqual([]);
      const seen = outcome && 'error' in outcome ? { error: failureOf(outcome.error) } : outcome;
      expect(seen).toEqual(expected(row, { value: row.scope }, { value: undefined }));
    }),
  );

  describe('set on an activity by another interceptor', () => {
    let worker: Worker;
    let running: Promise<void>;
    let ctx: ReturnType<typeof context>['ctx'];
    beforeAll(async () => {
      const fresh = context();
      ctx = fresh.ctx;
      worker = await Worker.create({
        connection: fresh.base.connection,
        taskQueue: ctx.taskQueue,
        workflowsPath: require.resolve('./fixtures/workflows'),
        interceptors: { workflowModules: [require.resolve('./fixtures/forged-header-interceptors')] },
        activities: guardedActivities(harness.redis, ctx.prefix),
        plugins: [new FireOncePlugin({ redis: harness.redis, keyPrefix: ctx.prefix, pollIntervalMs: 50 })],
      });
      running = worker.run();
    });
    afterAll(async () => {
      worker?.shutdown();
      await running;
    });

    it.each(rows)('%s: the guarded activity reads it as the row says, dispatching only under a valid scope', async (name, row) => {
      const handle = await ctx.start('forgedHeaderRun', [name]);
      const { outcome, taskFailures } = await settleRun(handle);
      expect(taskFailures).toEqual([]);
      const seen = outcome && 'error' in outcome ? { error: failureOf(outcome.error) } : { value: 'dispatched' };
      const missing = {
        error: { type: 'FireOnceMissingScope', nonRetryable: true, message: expect.stringMatching(/^activity "dispatchJob" has no dispatch scope/) },
      };
      expect(seen).toEqual(expected(row, { value: 'dispatched' }, missing));
      expect(await ctx.count('dispatchJob', name)).toBe(row.scope ? 1 : 0);
    });

    it('a run that set a scope of its own: the plugin leaves the header the other interceptor set alone', async () => {
      const row = scopeHeaderRow('a json/plain string');
      const own = `own-${randomUUID()}`;
      await (await ctx.start('forgedHeaderUnderScopeRun', [row.name, own])).result();
      const keys = new FireOnceKeys(ctx.prefix);
      expect(await ctx.redis.exists(keys.artifact(row.scope!, 'dispatchJob'))).toBe(1);
      expect(await ctx.redis.exists(keys.artifact(own, 'dispatchJob'))).toBe(0);
    });
  });
});
