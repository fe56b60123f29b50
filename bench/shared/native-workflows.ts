/**
 * The job workflow of the Temporal-native idiom (`native-job.ts`). Runs in the workflow sandbox:
 * it imports only `@temporalio/workflow`, never Redis or `node:*`.
 */
import { proxyActivities } from '@temporalio/workflow';

/** What one job workflow runs. */
export interface NativeJobInput {
  /** The activity that is the job, by its registered name. */
  readonly activity: string;
  readonly args: readonly unknown[];
  /** Its attempts: 1 means a failure fails the job workflow, and every run attached to it. */
  readonly maximumAttempts: number;
}

/** Run the job activity once (with `maximumAttempts` attempts) and return its result. */
export async function nativeJob(input: NativeJobInput): Promise<unknown> {
  const activities = proxyActivities<Record<string, (...args: unknown[]) => Promise<unknown>>>({
    startToCloseTimeout: '1 minute',
    retry: { maximumAttempts: input.maximumAttempts, initialInterval: '100 ms' },
  });
  return await activities[input.activity](...input.args);
}
