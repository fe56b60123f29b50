import { proxyActivities } from '@temporalio/workflow';
import { setDispatchScope } from '../../src/workflow';
import type { Summary, SummaryActivities } from './activities';

// Runs that find the job in flight park on its lock (the plugin's default onInFlight) and are
// completed with its result, so the timeout must cover the whole job, not only this run's share.
const { summarizeSession } = proxyActivities<SummaryActivities>({
  startToCloseTimeout: '1 minute',
});

/**
 * Summarise a session. Every request is a new run; the session ID is the dispatch scope, so the
 * summary is computed once and every other run, concurrent or later, gets the same value.
 */
export async function summarizeChat(sessionId: string): Promise<Summary> {
  setDispatchScope(sessionId);
  return await summarizeSession(sessionId);
}
