import { proxyActivities } from '@temporalio/workflow';
import { setDispatchScope } from '../../src/workflow';
import type { Summary, SummaryActivities } from './activities';

// Runs that find the job in flight park on its lock (the plugin's default onInFlight) and are
// completed with its result, so startToCloseTimeout must cover the whole job, not only this run's
// share. heartbeatTimeout bounds what a crashed worker costs: without it, the attempt that ran the
// job on that worker, and the runs it parked, are retried only at startToCloseTimeout. The worker
// heartbeats parked runs for you; the job heartbeats itself (activities.ts).
const { summarizeSession } = proxyActivities<SummaryActivities>({
  startToCloseTimeout: '1 minute',
  heartbeatTimeout: '5 seconds',
});

/**
 * Summarise a session. Every request is a new run; the session ID is the dispatch scope, so the
 * summary is computed once and every other run, concurrent or later, gets the same value.
 */
export async function summarizeChat(sessionId: string): Promise<Summary> {
  setDispatchScope(sessionId);
  return await summarizeSession(sessionId);
}
