import { proxyActivities } from '@temporalio/workflow';
import { setDispatchScope } from '../../src/workflow';
import type { Report, ReportActivities } from './activities';

// No retries inside a run: the next invocation is the retry, as in the seed's engine. The
// guard makes that safe, since it frees the step only when a dispatch fails.
const { renderReport } = proxyActivities<ReportActivities>({
  startToCloseTimeout: '1 minute',
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
