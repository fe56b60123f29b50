import { ActivityCancellationType, proxyActivities } from '@temporalio/workflow';
import { setDispatchScope } from '../../src/workflow';
import type { ChatActivities } from './activities';

const { dispatchSummary, dispatchSummaryObserved } = proxyActivities<ChatActivities>({
  startToCloseTimeout: '10 seconds',
});

// The wait for the summary heartbeats: a dead worker fails it after 5 s, not 2 minutes, and a
// cancelled run ends once the wait has stopped (it reads Redis no more), not before.
const { awaitSummary } = proxyActivities<ChatActivities>({
  startToCloseTimeout: '2 minutes',
  heartbeatTimeout: '5 seconds',
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  retry: { maximumAttempts: 1 },
});

/** One user message: a fresh workflow run that shares only the session ID with the others. */
export interface ChatTurnInput {
  readonly sessionId: string;
  readonly message: string;
  /** How long to wait for the summary artifact. @defaultValue 60 000 ms */
  readonly summaryTimeoutMs?: number;
}

/**
 * A chat turn with the fire-once guard. Every message starts a new run that re-executes from
 * the top and reaches the dispatch step; the session ID, set as the dispatch scope, is what
 * lets the guard see that an earlier run already dispatched the job.
 */
export async function chatTurn(input: ChatTurnInput): Promise<string> {
  setDispatchScope(input.sessionId);
  await dispatchSummary(input.sessionId, input.message);
  return await awaitSummary(input.sessionId, input.summaryTimeoutMs ?? 60_000);
}

/**
 * The same chat turn without the guard: every run dispatches the job again. The dispatch is
 * observed, not guarded: each one is recorded in the dispatch log, where
 * `npx fire-once report` flags the session as dispatched more than once.
 */
export async function chatTurnUnguarded(input: ChatTurnInput): Promise<string> {
  setDispatchScope(input.sessionId);
  await dispatchSummaryObserved(input.sessionId, input.message);
  return await awaitSummary(input.sessionId, input.summaryTimeoutMs ?? 60_000);
}
