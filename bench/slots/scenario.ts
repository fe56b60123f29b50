// One scenario of bench:slots: a burst of runs of one scope under one in-flight policy (or none,
// the control), with unrelated activities scheduled into it, on one task queue served by one or
// more worker processes. What the workers recorded is read back from Redis (activities.ts); when
// things happened on the Temporal server is read from the runs' histories, after the clock stops.
import { randomUUID } from 'node:crypto';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { tsToMs } from '@temporalio/common';
import type { Redis } from 'ioredis';
import { recordKeys, type Execution } from './activities';
import type { Policy } from './workflows';

export interface ScenarioOptions {
  readonly runs: number;
  readonly jobMs: number;
  readonly unrelated: number;
  readonly unrelatedAtMs: number;
}

/** Where the burst's time went, in ms after its first workflow start; the latest run's, for the ends. */
export interface Timeline {
  /** The dispatch (the holder's job) started. */
  readonly jobStarted: number;
  /** The job's body returned; commit and hand-over follow. */
  readonly jobEnded: number;
  /** The holder's activity returned: its commit and every completion call of the hand-over had returned. */
  readonly handedOver: number;
  /** The server recorded the last run's activity completed (for a parked waiter: the holder's completion call). */
  readonly lastActivityClosed: number;
  /** The server recorded the last run closed (its workflow task after the activity). */
  readonly lastRunClosed: number;
  /** This process saw the last result. */
  readonly burstDone: number;
  /** Runs whose activity was scheduled only after the job ended: their first workflow task came late, whatever the policy. */
  readonly scheduledAfterJob: number;
  /** Workflow tasks that timed out, over all the burst's runs (a worker took one and did not answer in time). */
  readonly workflowTaskTimeouts: number;
}

export interface Sample {
  readonly scheduleToStartMs: number[];
  readonly executions: number;
  readonly dispatches: number;
  /** Slot time held by executions that did not dispatch. */
  readonly waiterSlotSeconds: number;
  /** Executions that parked on a worker process other than the dispatch's, so that its commit completed them there. */
  readonly parkedElsewhere: number;
  readonly timeline?: Timeline;
}

export async function runScenario(
  policy: Policy | undefined,
  o: ScenarioOptions,
  client: Client,
  taskQueue: string,
  redis: Redis,
  prefix: string,
): Promise<Sample> {
  const scope = `${policy ?? 'control'}-${randomUUID()}`;
  const start = (workflow: 'burstRun' | 'unrelatedRun', args: unknown[]) =>
    client.workflow.start(workflow, { taskQueue, workflowId: `${workflow}-${randomUUID()}`, args } as never) as Promise<WorkflowHandle>;
  const t0 = Date.now();
  const burst =
    policy === undefined
      ? []
      : Array.from({ length: o.runs }, async () => {
          const handle = await start('burstRun', [scope, o.jobMs, policy]);
          await handle.result();
          return { handle, doneAt: Date.now() };
        });
  await new Promise((r) => setTimeout(r, o.unrelatedAtMs));
  const unrelated = await Promise.all(Array.from({ length: o.unrelated }, () => start('unrelatedRun', [scope])));
  const done = await Promise.all(burst);
  await Promise.all(unrelated.map((h) => h.result()));

  const executions = (await redis.lrange(recordKeys.executions(prefix, scope), 0, -1)).map((e) => JSON.parse(e) as Execution);
  const dispatch = executions.find((e) => e.dispatched);
  return {
    scheduleToStartMs: (await redis.lrange(recordKeys.scheduleToStart(prefix, scope), 0, -1)).map(Number),
    executions: executions.length,
    dispatches: Number((await redis.get(recordKeys.dispatches(prefix, scope))) ?? 0),
    waiterSlotSeconds: executions.filter((e) => !e.dispatched).reduce((sum, e) => sum + e.ms, 0) / 1000,
    parkedElsewhere: executions.filter((e) => e.parked && e.pid !== dispatch?.pid).length,
    ...(dispatch?.jobEndedAt === undefined || done.length === 0 ? {} : { timeline: await timeline(t0, dispatch, done) }),
  };
}

async function timeline(t0: number, dispatch: Execution, done: readonly { handle: WorkflowHandle; doneAt: number }[]): Promise<Timeline> {
  const closes = await Promise.all(
    done.map(async ({ handle }) => {
      const events = (await handle.fetchHistory()).events ?? [];
      const at = (has: (e: (typeof events)[number]) => unknown) => tsToMs([...events].reverse().find(has)?.eventTime);
      return {
        scheduled: at((e) => e.activityTaskScheduledEventAttributes),
        activity: at((e) => e.activityTaskCompletedEventAttributes),
        run: at((e) => e.workflowExecutionCompletedEventAttributes),
        workflowTaskTimeouts: events.filter((e) => e.workflowTaskTimedOutEventAttributes).length,
      };
    }),
  );
  const latest = (values: number[]) => Math.max(...values) - t0;
  return {
    jobStarted: dispatch.startedAt - t0,
    jobEnded: (dispatch.jobEndedAt as number) - t0,
    handedOver: dispatch.startedAt + dispatch.ms - t0,
    lastActivityClosed: latest(closes.map((c) => c.activity)),
    lastRunClosed: latest(closes.map((c) => c.run)),
    burstDone: latest(done.map((d) => d.doneAt)),
    scheduledAfterJob: closes.filter((c) => c.scheduled > (dispatch.jobEndedAt as number)).length,
    workflowTaskTimeouts: closes.reduce((sum, c) => sum + c.workflowTaskTimeouts, 0),
  };
}
