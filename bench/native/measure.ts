/**
 * What `bench:native` times and counts: one step per workflow run, run the three ways on one
 * worker and one dev server, interleaved so that the machine's noise falls on all three alike.
 */
import type { Client } from '@temporalio/client';
import { percentile } from '../cost/stats';
import { nativeJobId } from '../shared/native-job';
import { STEP, VARIANTS, type Variant } from './activities';
import { oneStep } from './workflows';

/** Where the steps run. */
export interface StepRunner {
  readonly client: Client;
  readonly taskQueue: string;
  /** Unique to this bench run: scopes and workflow IDs start with it. */
  readonly prefix: string;
  readonly progress: (line: string) => void;
}

/** p50 and p99 of one variant's step latencies, in ms. */
export interface Latency {
  readonly samples: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
}

/** The scope of fresh step `i` of `variant` in `phase`. */
export function scopeOf(runner: StepRunner, phase: string, variant: Variant, i: number): string {
  return `${runner.prefix}-${phase}-${variant}-${i}`;
}

/** Run one step in a new workflow run and resolve how long it took, start to result, in ms. */
async function timeStep(runner: StepRunner, variant: Variant, scope: string, workflowId: string): Promise<number> {
  const started = performance.now();
  await runner.client.workflow.execute(oneStep, { taskQueue: runner.taskQueue, workflowId, args: [variant, scope] });
  return performance.now() - started;
}

/** Variants in a different order for each `i`, so that none always runs first. */
function rotated(i: number): Variant[] {
  return VARIANTS.map((_, k) => VARIANTS[(i + k) % VARIANTS.length]);
}

function summarise(values: readonly number[]): Latency {
  return { samples: values.length, p50Ms: percentile(values, 50), p99Ms: percentile(values, 99) };
}

/**
 * Latency of `samples` fresh steps per variant (a scope never seen), then of the same steps
 * again (completed: the plugin fast-forwards, the native idiom reads the closed job workflow's
 * result, a plain activity simply runs again), one workflow at a time, variants interleaved.
 */
export async function measureLatency(runner: StepRunner, samples: number): Promise<Record<'fresh' | 'completed', Record<Variant, Latency>>> {
  const result = {} as Record<'fresh' | 'completed', Record<Variant, Latency>>;
  for (const phase of ['fresh', 'completed'] as const) {
    const times: Record<Variant, number[]> = { plain: [], plugin: [], native: [] };
    for (let i = 0; i < samples; i++) {
      if (i % 50 === 0) runner.progress(`latency: ${phase} ${i}/${samples}`);
      for (const variant of rotated(i)) {
        const scope = scopeOf(runner, 'latency', variant, i);
        times[variant].push(await timeStep(runner, variant, scope, `${runner.prefix}-latency-${phase}-${variant}-${i}`));
      }
    }
    result[phase] = { plain: summarise(times.plain), plugin: summarise(times.plugin), native: summarise(times.native) };
  }
  return result;
}

/** Steps per second of one variant with `inFlight` workflow runs at a time. */
export async function measureThroughput(runner: StepRunner, variant: Variant, steps: number, inFlight: number, tag: string): Promise<number> {
  let next = 0;
  const started = performance.now();
  const lane = async () => {
    for (let i = next++; i < steps; i = next++) {
      const scope = scopeOf(runner, `tput-${tag}`, variant, i);
      await runner.client.workflow.execute(oneStep, {
        taskQueue: runner.taskQueue,
        workflowId: `${runner.prefix}-tput-${tag}-${variant}-${i}`,
        args: [variant, scope],
      });
    }
  };
  await Promise.all(Array.from({ length: inFlight }, lane));
  return steps / ((performance.now() - started) / 1000);
}

/** History events of one step, fresh and completed: the run's own, plus the job workflow's it started. */
export interface HistoryCount {
  readonly fresh: number;
  readonly completed: number;
}

async function eventsOf(runner: StepRunner, workflowId: string): Promise<number> {
  const history = await runner.client.workflow.getHandle(workflowId).fetchHistory();
  return history.events?.length ?? 0;
}

/**
 * History events per step, from the latency phase's first `samples` steps (all the same in
 * practice; the mean is printed). A fresh native step counts its job workflow's events too: the
 * run started it. A completed one started nothing.
 */
export async function countHistory(runner: StepRunner, samples: number): Promise<Record<Variant, HistoryCount>> {
  const out = {} as Record<Variant, HistoryCount>;
  for (const variant of VARIANTS) {
    let fresh = 0;
    let completed = 0;
    for (let i = 0; i < samples; i++) {
      fresh += await eventsOf(runner, `${runner.prefix}-latency-fresh-${variant}-${i}`);
      if (variant === 'native') fresh += await eventsOf(runner, nativeJobId(scopeOf(runner, 'latency', variant, i), STEP));
      completed += await eventsOf(runner, `${runner.prefix}-latency-completed-${variant}-${i}`);
    }
    out[variant] = { fresh: fresh / samples, completed: completed / samples };
  }
  return out;
}
