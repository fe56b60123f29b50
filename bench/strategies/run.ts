/**
 * One bench run: a worker on a fresh task queue with every strategy's activities under a fresh
 * key prefix, the strategies driven one after another, their logs collected, the prefix deleted.
 */
import { randomBytes } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { Worker, type NativeConnection, type WorkflowBundle } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import { FireOncePlugin } from '../../src';
import { deleteKeysUnder } from '../../sample-workflows/shared/redis';
import { createStrategyActivities, strategyKeys } from './activities';
import type { BenchConfig } from './cli';
import { collectStrategy, driveStrategy, type DrivenScenario, type StrategyRun } from './scenario';

/** The long-lived connections every run shares. */
export interface BenchServices {
  readonly redis: Redis;
  readonly redisUrl: string;
  readonly native: NativeConnection;
  readonly client: Client;
  readonly workflowBundle: WorkflowBundle;
}

/** Called after each strategy of a run, for the progress line. */
export type ProgressListener = (result: StrategyRun) => void;

/**
 * Run every configured strategy once (run number `run`, from 1). The `fire-once` activities are
 * guarded by a real `FireOncePlugin` on that strategy's prefix under this run's; the strawmen
 * guard themselves. Deletes only this run's keys, whatever happens.
 */
export async function runOnce(services: BenchServices, config: BenchConfig, run: number, onResult: ProgressListener): Promise<StrategyRun[]> {
  const suffix = randomBytes(4).toString('hex');
  const runPrefix = `bench-strategies-${suffix}`;
  const taskQueue = `bench-strategies-${suffix}`;
  const { redis } = services;
  // The plugin's prefix is the fire-once strategy's own, as the sample pairs them: its summary key
  // (the external artifact) must then be a key of the guard's scope, which the guard checks.
  const plugin = new FireOncePlugin({ redis, keyPrefix: strategyKeys(runPrefix, 'fire-once').prefix, pollIntervalMs: 50 });
  const worker = await Worker.create({
    connection: services.native,
    taskQueue,
    activities: createStrategyActivities({ redis, runPrefix, lockTtlMs: config.lockTtlMs, client: services.client }),
    plugins: [plugin],
    workflowBundle: services.workflowBundle,
  });
  const driven: DrivenScenario[] = [];
  const ctx = { client: services.client, redis, redisUrl: services.redisUrl, taskQueue, runPrefix, config };
  try {
    const results: StrategyRun[] = [];
    await worker.runUntil(async () => {
      for (const strategy of config.strategies) {
        const scenario = await driveStrategy(ctx, strategy);
        driven.push(scenario);
        // Its runner finishes its last jobs in the background while the next strategy runs;
        // every job it took is already logged, so the counts below are final.
        const result = await collectStrategy(redis, runPrefix, run, scenario, config.lockTtlMs);
        results.push(result);
        onResult(result);
      }
    });
    return results;
  } finally {
    await Promise.allSettled(driven.map((d) => d.runnerStopped));
    await deleteKeysUnder(redis, runPrefix);
  }
}
