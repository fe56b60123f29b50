import { randomBytes, randomUUID } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import { startWorkflow, WorkflowRunOperationHandler } from '@temporalio/nexus';
import * as nexus from 'nexus-rpc';
import type { JobResult } from './fixtures/activities';
import { jobService, type NexusJobInput } from './fixtures/nexus-service';
import { nexusHandlerRun } from './fixtures/nexus-workflows';
import { newScope, oneResult, useFeatures, type FeatureContext } from '../support/features';

/** The operation's handler: starts `nexusHandlerRun` on the handler worker's task queue. */
const jobServiceHandler = nexus.serviceHandler(jobService, {
  runJob: new WorkflowRunOperationHandler<NexusJobInput, JobResult>((ctx, input) =>
    startWorkflow(ctx, nexusHandlerRun, { workflowId: `nexus-handler-${randomUUID()}`, args: [input] }),
  ),
});

/** A Nexus endpoint on the dev server that routes to this test's task queue; deleted after `use`. */
async function withEndpoint<T>(ctx: FeatureContext, use: (endpoint: string) => Promise<T>): Promise<T> {
  const name = `fire-once-${randomBytes(6).toString('hex')}`;
  const { operatorService } = ctx.client.connection;
  const { endpoint } = await operatorService.createNexusEndpoint({
    spec: { name, target: { worker: { namespace: ctx.client.options.namespace, taskQueue: ctx.taskQueue } } },
  });
  try {
    return await use(name);
  } finally {
    await operatorService.deleteNexusEndpoint({ id: endpoint!.id!, version: endpoint!.version! });
  }
}

/** The `type` of the first ApplicationFailure in `err`'s cause chain. */
function failureType(err: unknown): string | undefined {
  for (let e = err; e instanceof Error; e = e.cause) if (e instanceof ApplicationFailure) return e.type ?? undefined;
  return undefined;
}

// A Nexus operation crosses into a workflow the handler starts: no header of the caller's goes
// with it, so the scope does not cross. The caller passes it as input; the handler workflow sets it.
describe('Temporal features: Nexus', () => {
  const { withWorker } = useFeatures('nexus');
  const nexusWorker = { worker: { nexusServices: [jobServiceHandler] } };

  it('the scope does not cross the Nexus boundary: a handler workflow that sets none fails with FireOnceMissingScope, nothing dispatched', () =>
    withWorker(
      (ctx) =>
        withEndpoint(ctx, async (endpoint) => {
          const scope = newScope('nexus-none');
          const run = await ctx.start('nexusCallerRun', [endpoint, { scope, ms: 50, setScope: false }]);
          const err = await run.result().catch((e: unknown) => e);
          expect({ type: failureType(err), dispatched: await ctx.count('dispatchJob', scope) }).toEqual({ type: 'FireOnceMissingScope', dispatched: 0 });
        }),
      nexusWorker,
    ));

  it('the scope passed as input and set by the handler workflow: 2 callers at once and a later one share one dispatch', () =>
    withWorker(
      (ctx) =>
        withEndpoint(ctx, async (endpoint) => {
          const scope = newScope('nexus');
          const input = { scope, ms: 500, setScope: true };
          const concurrent = await Promise.all([ctx.start('nexusCallerRun', [endpoint, input]), ctx.start('nexusCallerRun', [endpoint, input])]);
          const results = await Promise.all(concurrent.map((h) => h.result()));
          oneResult([...results, await (await ctx.start('nexusCallerRun', [endpoint, input])).result()], scope);
          expect(await ctx.count('dispatchJob', scope)).toBe(1);
        }),
      nexusWorker,
    ));
});
