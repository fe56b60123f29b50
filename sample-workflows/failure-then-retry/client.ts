import { randomBytes } from 'node:crypto';
import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import type { Report } from './activities';
import { buildReport } from './workflows';
import { TASK_QUEUE } from './worker';
import { intFromEnv, runMain, temporalAddress } from '../shared/env';

/** How one request for a report ended. */
export type ReportOutcome = { readonly ok: true; readonly report: Report } | { readonly ok: false; readonly error: WorkflowFailedError };

/**
 * Request a report: start a new run of `buildReport` and wait for it. A failed run resolves
 * `{ ok: false }` with the workflow's failure rather than rejecting, so callers can go on to
 * the next request the way a user would.
 */
export async function requestReport(client: Client, taskQueue: string, reportId: string): Promise<ReportOutcome> {
  try {
    const report = await client.workflow.execute(buildReport, {
      taskQueue,
      workflowId: `${reportId}-request-${randomBytes(4).toString('hex')}`,
      args: [reportId],
    });
    return { ok: true, report };
  } catch (err) {
    if (err instanceof WorkflowFailedError) return { ok: false, error: err };
    throw err;
  }
}

/** A one-line account of an outcome, with the root cause of a failure. */
export function describeOutcome(outcome: ReportOutcome): string {
  if (outcome.ok) return `ok: ${outcome.report.body}`;
  let cause: Error | undefined = outcome.error;
  while (cause?.cause instanceof Error) cause = cause.cause;
  return `failed: ${cause?.message ?? outcome.error.message}`;
}

if (require.main === module) {
  runMain(async () => {
    const connection = await Connection.connect({ address: temporalAddress() });
    try {
      const client = new Client({ connection });
      const reportId = process.env.REPORT_ID ?? `report-${randomBytes(3).toString('hex')}`;
      const requests = intFromEnv('REQUESTS', 4);
      for (let i = 1; i <= requests; i++) {
        console.log(`request ${i} for ${reportId}: ${describeOutcome(await requestReport(client, TASK_QUEUE, reportId))}`);
      }
    } finally {
      await connection.close();
    }
  });
}
