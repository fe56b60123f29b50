/**
 * The workflows of `bench:native`. Runs in the workflow sandbox: it imports only
 * `@temporalio/workflow` and types, never Redis or `node:*`.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { FailureVariant, NativeBenchActivities, Variant } from './activities';

// The job workflow of the native idiom, started by `startOrAttachStep` / `startOrAttachFlakyJob`.
export { nativeJob } from '../shared/native-workflows';

const steps = proxyActivities<NativeBenchActivities>({ startToCloseTimeout: '1 minute', retry: { maximumAttempts: 1 } });

/**
 * One invocation reaching one step, run the `variant` way. A fresh workflow run each time, as in
 * the seed: its history knows nothing of earlier runs of the same scope.
 */
export async function oneStep(variant: Variant, scope: string): Promise<string> {
  switch (variant) {
    case 'plain':
      return await steps.plainStep(scope);
    case 'plugin':
      return await steps.guardedStep(scope);
    case 'native':
      return await steps.startOrAttachStep(scope);
  }
}

/**
 * One invocation reaching a job that fails on its first run. `plugin`: the guarded job, one
 * attempt; `native`: the job workflow with one attempt; `native-retry`: with two attempts.
 */
export async function flakyStep(variant: FailureVariant, scope: string): Promise<string> {
  switch (variant) {
    case 'plugin':
      return await steps.guardedFlakyJob(scope);
    case 'native':
      return await steps.startOrAttachFlakyJob(scope, 1);
    case 'native-retry':
      return await steps.startOrAttachFlakyJob(scope, 2);
  }
}
