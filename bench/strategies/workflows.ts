/**
 * The bench's workflow. Runs in the workflow sandbox: it imports only `@temporalio/workflow` and
 * the fire-once workflow entry, never Redis or `node:*`.
 */
import { proxyActivities } from '@temporalio/workflow';
import { setDispatchScope } from '../../src/workflow';

// The job workflow of the `temporal-native` strategy, started by its dispatch activity.
export { nativeJob } from '../shared/native-workflows';

/** The activities of one strategy, registered as `<strategy>:dispatch` and `<strategy>:awaitSummary`. */
type StrategyActivities = Record<string, (...args: unknown[]) => Promise<unknown>>;

const dispatchActivities = proxyActivities<StrategyActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { maximumAttempts: 1 },
});

const awaitActivities = proxyActivities<StrategyActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { maximumAttempts: 1 },
});

/** One fresh invocation of the chat step, under one strategy. */
export interface StrategyTurnInput {
  /** Strategy name; picks the activities `<strategy>:dispatch` and `<strategy>:awaitSummary`. */
  readonly strategy: string;
  /** The chat session every invocation shares: the dispatch scope. */
  readonly sessionId: string;
  /** This invocation's ID (`o`, `a1`, `b2`, `c3`…): the job carries it, so the runner's log names it. */
  readonly invocation: string;
  /** How long to wait for the summary artifact. */
  readonly summaryTimeoutMs: number;
}

/**
 * The chat step as each strategy runs it: a new invocation that re-executes from the top,
 * reaches the dispatch step, then waits for the job's summary artifact. The invocation ID is
 * the job's message, which is how the job runner's log attributes every dispatch.
 */
export async function strategyTurn(input: StrategyTurnInput): Promise<string> {
  setDispatchScope(input.sessionId);
  await dispatchActivities[`${input.strategy}:dispatch`](input.sessionId, input.invocation);
  return (await awaitActivities[`${input.strategy}:awaitSummary`](input.sessionId, input.summaryTimeoutMs)) as string;
}
