import { randomUUID } from 'node:crypto';
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import type { JobResult } from '../../faults/fixtures/activities';
import type * as workflows from '../../faults/fixtures/workflows';
import { mapLimit } from '../wait';

type Workflows = typeof workflows;

/** A client on one Temporal address and task queue, with the fixtures' workflows typed. */
export class FaultClient {
  private constructor(
    readonly connection: Connection,
    readonly client: Client,
  ) {}

  static async connect(address: string): Promise<FaultClient> {
    const connection = await Connection.connect({ address });
    return new FaultClient(connection, new Client({ connection }));
  }

  start<W extends keyof Workflows>(
    taskQueue: string,
    workflow: W,
    args: Parameters<Workflows[W]>,
    id = `${workflow}-${randomUUID()}`,
  ): Promise<WorkflowHandle<Workflows[W]>> {
    return this.client.workflow.start(workflow, { taskQueue, workflowId: id, args } as never) as Promise<WorkflowHandle<Workflows[W]>>;
  }

  /**
   * Every handle's result, `limit` at a time. A call that fails because the server is away is
   * tried again (the Temporal-restart suite) until `deadline`; a failed workflow rejects.
   */
  results(handles: readonly WorkflowHandle[], limit = 100, deadline = Date.now() + 240_000): Promise<JobResult[]> {
    return mapLimit(handles, limit, async (handle) => {
      for (;;) {
        try {
          return (await handle.result()) as JobResult;
        } catch (err) {
          if (!isTransient(err) || Date.now() > deadline) throw err;
          await new Promise((r) => setTimeout(r, 250));
        }
      }
    });
  }

  /** `type` and retryability of the last failure of the workflow's pending activity, if any. */
  async lastActivityFailure(handle: WorkflowHandle): Promise<{ type: string; retryable: boolean } | undefined> {
    const { raw } = await handle.describe();
    const info = raw.pendingActivities?.[0]?.lastFailure?.applicationFailureInfo;
    return info?.type ? { type: info.type, retryable: !info.nonRetryable } : undefined;
  }

  /** The attempt number of the activity whose result the workflow got (from its history). */
  async completedAttempt(handle: WorkflowHandle): Promise<number> {
    const history = await handle.fetchHistory();
    const started = history.events?.find((e) => e.activityTaskStartedEventAttributes)?.activityTaskStartedEventAttributes;
    return started?.attempt ?? 0;
  }

  close(): Promise<void> {
    return this.connection.close();
  }
}

/** A gRPC error that means "the server is not there right now", not "the workflow failed". */
function isTransient(err: unknown): boolean {
  const text = `${(err as Error)?.name ?? ''} ${(err as Error)?.message ?? ''} ${String((err as { cause?: unknown })?.cause ?? '')}`;
  return /UNAVAILABLE|ECONNREFUSED|DEADLINE_EXCEEDED|ServiceError|Connection|transport|socket/i.test(text) && !/WorkflowFailedError/.test(text);
}
