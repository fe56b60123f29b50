import { randomBytes } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import type { Summary } from './activities';
import { summarizeChat } from './workflows';
import { TASK_QUEUE } from './worker';
import { intFromEnv, runMain, temporalAddress } from '../shared/env';
import { sleep } from '../shared/redis';

/** A batch of summary requests for one session. */
export interface RequestOptions {
  readonly taskQueue: string;
  readonly sessionId: string;
  /** Runs to start, each a new workflow execution. */
  readonly invocations: number;
  /** Gap between two starts. @defaultValue 0 */
  readonly spacingMs?: number;
}

/**
 * Start `invocations` new runs of `summarizeChat` for one session, `spacingMs` apart, and
 * resolve with their results in start order.
 */
export async function requestSummaries(client: Client, options: RequestOptions): Promise<Summary[]> {
  const results: Promise<Summary>[] = [];
  for (let i = 1; i <= options.invocations; i++) {
    const handle = await client.workflow.start(summarizeChat, {
      taskQueue: options.taskQueue,
      workflowId: `${options.sessionId}-summary-${randomBytes(4).toString('hex')}`,
      args: [options.sessionId],
    });
    results.push(handle.result());
    if (i < options.invocations) await sleep(options.spacingMs ?? 0);
  }
  return await Promise.all(results);
}

if (require.main === module) {
  runMain(async () => {
    const connection = await Connection.connect({ address: temporalAddress() });
    try {
      const client = new Client({ connection });
      const sessionId = process.env.SESSION_ID ?? `session-${randomBytes(3).toString('hex')}`;
      const invocations = intFromEnv('INVOCATIONS', 5);
      const results = await requestSummaries(client, { taskQueue: TASK_QUEUE, sessionId, invocations, spacingMs: 10 });
      const jobIds = new Set(results.map((summary) => summary.jobId));
      console.log(`${invocations} runs for ${sessionId} got ${jobIds.size} distinct result(s):`);
      for (const summary of results) console.log(`  ${JSON.stringify(summary)}`);
    } finally {
      await connection.close();
    }
  });
}
