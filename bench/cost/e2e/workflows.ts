// Runs in the workflow sandbox: imports only @temporalio/workflow and types.
import { proxyActivities } from '@temporalio/workflow';
import type { E2eActivities, E2eKind } from './activities';

const steps = proxyActivities<E2eActivities>({ startToCloseTimeout: '30s', retry: { maximumAttempts: 1 } });

/**
 * Run `count` activities of one kind at once, each its own `(scope, step)`. Resolves how many
 * completed.
 *
 * @example
 * ```ts
 * // client.workflow.start(costWorkflow, { taskQueue, workflowId: 'w1', args: ['guarded', 'w1', 5] })
 * ```
 */
export async function costWorkflow(kind: E2eKind, scope: string, count: number): Promise<number> {
  const step = steps[`${kind}Step`];
  const results = await Promise.all(Array.from({ length: count }, (_, i) => step(scope, i)));
  return results.length;
}
