/**
 * The "Temporal-native" answer to fire-once, as a Temporal expert would write it, for the benches
 * to compare against: no Redis, a job workflow per (scope, step), keyed `job:{scope}:{step}`, and
 * started with
 *
 * - `workflowIdConflictPolicy: USE_EXISTING`: a run that arrives while the job is open attaches
 *   to it instead of starting a second one;
 * - `workflowIdReusePolicy: ALLOW_DUPLICATE_FAILED_ONLY`: once the job completed, starting it
 *   again is refused (the run reads its result instead); once it failed, the next run starts it
 *   again. Release on failure, as the fire-once lock does.
 *
 * A workflow cannot await another workflow's result by ID, so an activity starts or attaches and
 * waits (`startOrAttachJob`); the job workflow runs the real job as an activity
 * (`nativeJob` in `native-workflows.ts`). The dedup lasts as long as Temporal keeps the closed job
 * workflow: the namespace's retention (24 h on the dev server).
 */
import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import type { nativeJob } from './native-workflows';

/** The job workflow's ID for one (scope, step). */
export function nativeJobId(scope: string, step: string): string {
  return `job:${scope}:${step}`;
}

/** Which job to start or attach to, and how the job workflow runs it. */
export interface NativeJobRequest {
  readonly client: Client;
  readonly taskQueue: string;
  readonly scope: string;
  readonly step: string;
  /** The activity the job workflow runs: the job itself. */
  readonly activity: string;
  readonly args: readonly unknown[];
  /** Attempts of that activity inside the job workflow. 1: a failure fails the job and every run attached to it. */
  readonly maximumAttempts: number;
}

/**
 * Start the job workflow, or attach to the open one, or read the completed one's result; resolve
 * the job's result. Rejects with the job workflow's failure (`WorkflowFailedError`) if it failed.
 */
export async function startOrAttachJob<T>(request: NativeJobRequest): Promise<T> {
  const workflowId = nativeJobId(request.scope, request.step);
  const { client } = request;
  try {
    const handle = await client.workflow.start<typeof nativeJob>('nativeJob', {
      taskQueue: request.taskQueue,
      workflowId,
      args: [{ activity: request.activity, args: [...request.args], maximumAttempts: request.maximumAttempts }],
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
    });
    return (await handle.result()) as T;
  } catch (err) {
    // Completed before: the reuse policy refuses a new run; its result is still there.
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    return (await client.workflow.getHandle(workflowId).result()) as T;
  }
}
