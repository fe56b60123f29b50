/**
 * The scale bench's workflow: one invocation of a guarded dispatch step. Runs in the workflow
 * sandbox: it imports only `@temporalio/workflow` and the fire-once workflow entry.
 */
import { proxyActivities } from '@temporalio/workflow';
import { setDispatchScope } from '../../src/workflow';
import type { ScaleActivities } from './activities';

const { dispatchJob } = proxyActivities<ScaleActivities>({
  startToCloseTimeout: '60 seconds',
  // A waiter gives up shortly before start-to-close with the retryable FireOnceInFlight; the
  // retry waits again. Retries never dispatch twice: the guard decides.
  retry: { initialInterval: '1 second', maximumAttempts: 5 },
});

/** One racing invocation: set the scope every invocation shares, then reach the dispatch step. */
export async function scaleRun(scope: string): Promise<string> {
  setDispatchScope(scope);
  return dispatchJob(scope);
}
