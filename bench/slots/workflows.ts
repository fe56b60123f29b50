import { proxyActivities } from '@temporalio/workflow';
import { setDispatchScope } from '../../src/workflow';
import type { BenchActivities } from './activities';

const acts = proxyActivities<BenchActivities>({
  startToCloseTimeout: '60s',
  heartbeatTimeout: '10s',
  retry: { initialInterval: '100ms', backoffCoefficient: 2, maximumInterval: '10s' },
});

export type Policy = 'jobPark' | 'jobWait' | 'jobFail' | 'jobSkip';

/** One run of the burst: the scope's job, under the given in-flight policy. */
export async function burstRun(scope: string, ms: number, policy: Policy): Promise<void> {
  setDispatchScope(scope);
  await acts[policy](scope, ms);
}

/** One unrelated run: a 10 ms activity that records its schedule-to-start. */
export async function unrelatedRun(tag: string): Promise<void> {
  await acts.unrelated(tag);
}
