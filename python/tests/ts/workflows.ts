// The TypeScript workflow of the cross-language tests: set the scope, call one activity by name
// on a given task queue. Bundled by the TypeScript worker in worker.ts.
import { proxyActivities } from '@temporalio/workflow';
import { setDispatchScope } from '../../../src/workflow';

export async function tsGuardedCall(scope: string, activity: string, args: unknown[], taskQueue?: string): Promise<unknown> {
  setDispatchScope(scope);
  const activities = proxyActivities<Record<string, (...a: unknown[]) => Promise<unknown>>>({
    startToCloseTimeout: '30 seconds',
    retry: { maximumAttempts: 5, initialInterval: '100 ms' },
    ...(taskQueue ? { taskQueue } : {}),
  });
  return await activities[activity](...args);
}
