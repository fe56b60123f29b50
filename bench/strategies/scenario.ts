/**
 * One strategy through the three phases of the chat-session scenario, on a worker that is
 * already running, and the attribution of the job runner's log to the phases afterwards.
 */
import type { Client, WorkflowHandle } from '@temporalio/client';
import type { Redis } from 'ioredis';
import { sleep, waitUntil } from '../../sample-workflows/shared/redis';
import { strategyKeys } from './activities';
import type { BenchConfig } from './cli';
import { readRunnerLog, runnerKeys, startBenchRunner } from './job-runner';
import { sessionOf, type DuplicatePhase, type Phase, type StrategyName } from './strategies';
import { strategyTurn } from './workflows';

/** What a scenario runs against. */
export interface ScenarioContext {
  readonly client: Client;
  readonly redis: Redis;
  readonly redisUrl: string;
  readonly taskQueue: string;
  readonly runPrefix: string;
  readonly config: BenchConfig;
}

/** One invocation: a fresh workflow run, started at `at` ms after the scenario began. */
export interface InvocationRecord {
  readonly id: string;
  readonly phase: Phase;
  readonly at: number;
}

/** One dispatch, as the job runner logged it, attributed to the invocation that pushed the job. */
export interface DispatchRecord {
  readonly invocation: string;
  readonly phase: Phase;
  readonly at: number;
}

/** Moments of the scenario, in ms after it began; from the runner's log where it has them. */
export interface ScenarioMarks {
  /** The first job was taken by the runner: in flight. */
  readonly inFlightAt: number;
  /** The first job resolved (runner's log); phase (b) fired right after. */
  readonly resolvedAt: number;
  /** The first job's artifact was written (runner's log): the end of the (b) window. */
  readonly artifactAt: number;
  /** When a lock taken at dispatch of the first job has run out. */
  readonly lockExpiredAt: number;
  readonly phaseAAt: number;
  readonly phaseBAt: number;
  readonly phaseCAt: number;
  /** Every invocation's workflow completed. */
  readonly doneAt: number;
}

/** What one strategy did in one run. */
export interface StrategyRun {
  readonly strategy: StrategyName;
  readonly run: number;
  readonly invocations: readonly InvocationRecord[];
  readonly dispatches: readonly DispatchRecord[];
  readonly duplicates: Readonly<Record<DuplicatePhase, number>>;
  readonly wallMs: number;
  readonly marks: ScenarioMarks;
}

/** A scenario whose invocations are done and whose dispatches are all logged; its runner may still be finishing jobs. */
export interface DrivenScenario {
  readonly strategy: StrategyName;
  readonly started: number;
  readonly invocations: readonly InvocationRecord[];
  readonly moments: { readonly phaseAAt: number; readonly phaseBAt: number; readonly phaseCAt: number; readonly doneAt: number };
  /** Resolves once the runner has finished every job it took and disconnected. */
  readonly runnerStopped: Promise<void>;
}

/**
 * Drive one strategy: the opening invocation, then (a) a burst once its job is in flight, (b) a
 * burst as soon as the runner signals the job resolved, (c) a burst once the lock TTL has run out
 * and the artifact exists. Resolves when every invocation's workflow has completed and every
 * dispatched job is in the runner's log; the runner finishes its last jobs in the background.
 */
export async function driveStrategy(ctx: ScenarioContext, strategy: StrategyName): Promise<DrivenScenario> {
  const { client, redis, config } = ctx;
  const keys = strategyKeys(ctx.runPrefix, strategy);
  const rkeys = runnerKeys(keys);
  const runner = startBenchRunner({ redisUrl: ctx.redisUrl, keys, jobMs: config.jobMs, artifactDelayMs: config.artifactDelayMs });
  const started = Date.now();
  const invocations: InvocationRecord[] = [];
  const handles: WorkflowHandle[] = [];
  const sessionId = sessionOf(strategy);
  const summaryTimeoutMs = 60_000;

  async function invoke(id: string, phase: Phase): Promise<void> {
    invocations.push({ id, phase, at: Date.now() - started });
    handles.push(
      await client.workflow.start(strategyTurn, {
        taskQueue: ctx.taskQueue,
        workflowId: `${ctx.taskQueue}-${strategy}-${id}`,
        args: [{ strategy, sessionId, invocation: id, summaryTimeoutMs }],
      }),
    );
  }
  async function burst(phase: DuplicatePhase, count: number): Promise<number> {
    const at = Date.now() - started;
    for (let i = 1; i <= count; i++) {
      await invoke(`${phase}${i}`, phase);
      if (i < count) await sleep(config.spacingMs);
    }
    return at;
  }
  const hasEvent = async (kind: string, invocation: string) => (await readRunnerLog(redis, keys)).some((e) => e.kind === kind && e.invocation === invocation);

  try {
    await invoke('o', 'open');
    await waitUntil(`${strategy}: the opening job to be in flight`, () => hasEvent('taken', 'o'));
    const inFlightAt = Date.now();
    const phaseAAt = await burst('a', config.burstA);
    await waitUntil(`${strategy}: the opening job to resolve`, async () => (await redis.exists(rkeys.resolved('o'))) === 1);
    const phaseBAt = await burst('b', config.burstB);
    await waitUntil(`${strategy}: the opening job's artifact`, () => hasEvent('artifact', 'o'));
    const lockGoneAt = inFlightAt + config.lockTtlMs + 250;
    if (Date.now() < lockGoneAt) await sleep(lockGoneAt - Date.now());
    const phaseCAt = await burst('c', config.burstC);
    await Promise.all(handles.map((handle) => handle.result()));
    const doneAt = Date.now() - started;
    await waitUntil(`${strategy}: the runner to take every pushed job`, async () => (await redis.llen(keys.jobs)) === 0);
    await runner.stopTaking(); // every dispatch is in the runner's log from here on
    return { strategy, started, invocations, moments: { phaseAAt, phaseBAt, phaseCAt, doneAt }, runnerStopped: runner.stop() };
  } catch (err) {
    await runner.stop();
    throw err;
  }
}

/**
 * Read the runner's log of a driven scenario and attribute every job
 * it took, one dispatch each, to the phase of the invocation whose dispatch pushed it.
 */
export async function collectStrategy(redis: Redis, runPrefix: string, run: number, driven: DrivenScenario, lockTtlMs: number): Promise<StrategyRun> {
  const log = await readRunnerLog(redis, strategyKeys(runPrefix, driven.strategy));
  const phaseOf = new Map(driven.invocations.map((inv) => [inv.id, inv.phase]));
  const rel = (at: number) => at - driven.started;
  const dispatches: DispatchRecord[] = log
    .filter((e) => e.kind === 'taken')
    .map((e) => {
      const phase = phaseOf.get(e.invocation);
      if (phase === undefined) throw new Error(`${driven.strategy}: the runner took a job from unknown invocation ${e.invocation}`);
      return { invocation: e.invocation, phase, at: rel(e.at) };
    });
  const first = (kind: string) => rel(log.find((e) => e.kind === kind && e.invocation === 'o')?.at ?? Number.NaN);
  const count = (phase: DuplicatePhase) => dispatches.filter((d) => d.phase === phase).length;
  return {
    strategy: driven.strategy,
    run,
    invocations: driven.invocations,
    dispatches,
    duplicates: { a: count('a'), b: count('b'), c: count('c') },
    wallMs: driven.moments.doneAt,
    marks: {
      inFlightAt: first('taken'),
      resolvedAt: first('resolved'),
      artifactAt: first('artifact'),
      lockExpiredAt: first('taken') + lockTtlMs,
      ...driven.moments,
    },
  };
}
