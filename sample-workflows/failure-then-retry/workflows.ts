import { proxyActivities } from '@temporalio/workflow';
import { setDispatchScope } from '../../src/workflow';
import type { Report, ReportActivities } from './activities';

// No retries inside a run: the next invocation is the retry, as in the seed's engine. The
// guard makes that safe, since it frees the step only when a dispatch fails. heartbeatTimeout:
// a run whose worker dies fails after 5 s, not at startToCloseTimeout. The worker heartbeats a
// run that waits for another's render (in its slot: a last attempt never parks); the render
// heartbeats itself (activities.ts).
const { renderReport } = proxyActivities<ReportActivities>({
  startToCloseTimeout: '1 minute',
  heartbeatTimeout: '5 seconds',
  retry: { maximumAttempts: 1 },
});

/**
 * Build a report. Each request is a new run scoped by the report ID: a failed render fails this
 * run and lets the next one try again; once a render succeeds, every later run gets its result.
 */
export async function buildReport(reportId: string): Promise<Report> {
  setDispatchScope(reportId);
  return await renderReport(reportId);
}
