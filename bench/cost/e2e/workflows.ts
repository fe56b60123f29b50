// Runs in the workflow sandbox: imports only @temporalio/workflow and types.
import { proxyActivities } from '@temporalio/workflow';
import type { E2eActivities } from './activities';

const steps = proxyActivities<E2eActivities>({ startToCloseTimeout: '30s', retry: { maximumAttempts: 1 } });

/**
 * Run `count` activities at once, all guarded or all plain, each its own `(scope, step)`.
 * Resolves how many completed.
 *
 * @example
 * ```ts
 * // client.workflow.start(costWorkflow, { taskQueue, workflowId: 'w1', args: [true, 'w1', 5] })
 * ```
 */
export async function costWorkflow(guarded: boolean, scope: string, count: number): Promise<number> {
  const step = guarded ? steps.guardedStep : steps.plainStep;
  const results = await Promise.all(Array.from({ length: count }, (_, i) => step(scope, i)));
  return results.length;
}
