/**
 * Through Temporal: K scopes, each raced by `racers` workflow runs started at once, on two
 * worker processes whose guard is on the store. Dispatches are counted by the job's own INCR.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { WorkflowExecutionAlreadyStartedError, WorkflowFailedError, type Client, type WorkflowHandle } from '@temporalio/client';
import { startWorkerProcess, stopChild } from '../../sample-workflows/services';
import type { RaceResult } from './core-race';
import { tallyDispatches } from './counts';
import { forEachLimited } from './pool';
import { deletePrefix, type Store } from './stores';

export interface E2eRaceConfig {
  readonly scopes: number;
  readonly racers: number;
  readonly jobMs: number;
  /** Scopes whose runs are in flight at the same time. */
  readonly concurrency: number;
  /** Worker processes on the task queue. */
  readonly workers: number;
}

export interface E2eServices {
  readonly client: Client;
  readonly temporalAddress: string;
  /** Path of the workflow bundle built once for every worker. */
  readonly bundlePath: string;
}

/** A long run's heartbeat on stderr: scopes finished, failures so far, the pace. */
function reportProgress(store: string, done: number, config: E2eRaceConfig, failed: number, elapsedMs: number): void {
  const runsPerS = (done * config.racers) / (elapsedMs / 1000);
  process.stderr.write(
    `  e2e  ${store}: ${done}/${config.scopes} scopes, ${failed} failed, ${runsPerS.toFixed(1)} runs/s, ${Math.round(elapsedMs / 1000)} s\n`,
  );
}

const CLIENT_ATTEMPTS = 5;

/**
 * Start one racing run and wait for its result. A call the dev server could not answer (a
 * deadline passed while it stalled) is tried again, up to {@link CLIENT_ATTEMPTS} times: a start
 * under the same workflow ID that finds the run already started waits for that run, so each
 * invocation is one run whatever the retries. A run that fails is a failure, never retried.
 */
async function runToCompletion(client: Client, taskQueue: string, workflowId: string, scope: string): Promise<void> {
  let handle: WorkflowHandle | undefined;
  for (let attempt = 1; ; attempt++) {
    try {
      handle ??= await client.workflow.start('scaleRun', { taskQueue, workflowId, args: [scope] }).catch((err: unknown) => {
        if (err instanceof WorkflowExecutionAlreadyStartedError) return client.workflow.getHandle(workflowId);
        throw err;
      });
      await handle.result();
      return;
    } catch (err) {
      if (err instanceof WorkflowFailedError || attempt >= CLIENT_ATTEMPTS) throw err;
      await new Promise((r) => setTimeout(r, 1_000 * attempt));
    }
  }
}

export async function e2eRace(store: Store, services: E2eServices, config: E2eRaceConfig): Promise<RaceResult> {
  const suffix = randomBytes(4).toString('hex');
  const prefix = `bench-scale-${suffix}`;
  const taskQueue = `bench-scale-${suffix}`;
  const redis = store.connect();
  const workers: ChildProcess[] = [];
  const scopes = Array.from({ length: config.scopes }, (_, i) => `s${i}-${randomBytes(3).toString('hex')}`);
  let failed = 0;
  try {
    const env = {
      ...store.env,
      TEMPORAL_ADDRESS: services.temporalAddress,
      TASK_QUEUE: taskQueue,
      KEY_PREFIX: prefix,
      JOB_MS: String(config.jobMs),
      WORKFLOW_BUNDLE: services.bundlePath,
    };
    for (let i = 0; i < config.workers; i++) workers.push(await startWorkerProcess(join(__dirname, 'worker.ts'), env));
    const started = Date.now();
    const progressEvery = Math.max(1, Math.floor(config.scopes / 20));
    let done = 0;
    await forEachLimited(scopes, config.concurrency, async (scope) => {
      await Promise.all(
        Array.from({ length: config.racers }, (_, i) =>
          runToCompletion(services.client, taskQueue, `${prefix}-${scope}-${i}`, scope).catch((err: unknown) => {
            failed++;
            process.stderr.write(`  e2e  ${store.name}: ${prefix}-${scope}-${i} failed: ${(err as Error).message}\n`);
          }),
        ),
      );
      if (++done % progressEvery === 0) reportProgress(store.name, done, config, failed, Date.now() - started);
    });
    const wallMs = Date.now() - started;
    const tally = await tallyDispatches(redis, prefix, scopes);
    return { mode: 'e2e', store: store.name, racers: config.racers, invocations: scopes.length * config.racers, wallMs, failed, ...tally };
  } finally {
    await Promise.all(workers.map((w) => stopChild(w)));
    await deletePrefix(redis, prefix);
    redis.disconnect();
  }
}
