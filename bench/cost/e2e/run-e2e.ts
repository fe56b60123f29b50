import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Worker, bundleWorkflowCode } from '@temporalio/worker';
import { Redis } from 'ioredis';
import { FAST_DEV_SERVER, startTemporal } from '../../../sample-workflows/services';
import { quietTemporalLogs } from '../../../sample-workflows/shared/temporal';
import { FireOncePlugin } from '../library';
import { LOCK_TTL_MS } from '../guards';
import { memoryPerStep, scanKeys, type StepMemory } from '../memory';
import { CommandCounter } from '../round-trips';
import { median } from '../stats';
import { createE2eActivities, type E2eKind } from './activities';
import { profileByOrigin, type OriginTime } from './profile';
import { costWorkflow } from './workflows';

/** How much the end-to-end bench does. */
export interface E2eOptions {
  readonly reps: number;
  /** Workflow runs per batch; each rep runs one guarded, one plain and one floor batch. */
  readonly workflows: number;
  /** Activities each workflow runs at once. */
  readonly activitiesPerWorkflow: number;
  readonly payload: string;
  readonly progress: (line: string) => void;
  /** Profile four more batches of each kind, untimed, and write the profiles here. */
  readonly profileDir?: string;
}

/** One batch: activities per second, how long it took, and the CPU it cost per activity. */
export interface BatchResult {
  readonly rate: number;
  readonly seconds: number;
  /** CPU microseconds per activity, this process (worker and client) plus redis-server. */
  readonly cpuUs: number;
  /** redis-server's part of `cpuUs`. */
  readonly redisCpuUs: number;
}

/** One repetition: a batch of each kind. */
export type E2eRep = Readonly<Record<E2eKind, BatchResult>>;

/** Guarded against plain activities per second on one worker and one dev server. */
export interface E2eResult {
  readonly temporalSource: string;
  readonly guardedPerSec: number;
  readonly plainPerSec: number;
  /** Median over repetitions of guarded / plain. */
  readonly ratio: number;
  /** Total guarded activities per second over total plain ones, every repetition pooled. */
  readonly pooledRatio: number;
  /** The lowest and highest guarded / plain of one repetition: how noisy the pairs were. */
  readonly ratioRange: readonly [number, number];
  /**
   * CPU per activity, median over repetitions, in microseconds: the bench process (worker and
   * client, from process.cpuUsage) plus redis-server (INFO CPU). Wall throughput on 2 shared cores
   * is noisy; this is the figure to drive down.
   */
  readonly cpuUsPerActivity: { readonly guarded: number; readonly plain: number; readonly redisGuarded: number; readonly redisPlain: number };
  /**
   * The floor: plain activities that make two plain Redis round trips of their own (`SET NX PX`,
   * then `SET PX` of the result), the least any guard that checks before and stores after can do.
   * Pooled over every repetition, as `pooledRatio`.
   */
  readonly floor: {
    readonly perSec: number;
    readonly overPlainPooled: number;
    readonly guardedOverFloorPooled: number;
    readonly cpuUs: number;
    readonly redisCpuUs: number;
  };
  /**
   * Redis commands the worker sent per guarded activity, counted through ioredis' command hook
   * over one extra, untimed batch; by command name. Fire-and-forget writes count too.
   */
  readonly commandsPerGuardedActivity: number;
  readonly commandNames: Readonly<Record<string, number>>;
  /** `MEMORY USAGE` of every key under the plugin's prefix, per guarded activity. */
  readonly memoryPerGuardedActivity: StepMemory;
  /** Workflow runs that failed, with their cause chain; their activities do not count. */
  readonly failures: readonly string[];
  /** Artifacts found after the run: one per guarded activity, or the guard did not run. */
  readonly artifacts: number;
  readonly expectedArtifacts: number;
  readonly reps: readonly E2eRep[];
  /** With `profileDir`: main-thread time per activity by where the code lives, for each kind. */
  readonly profile?: readonly OriginTime[];
}

const KINDS: readonly E2eKind[] = ['guarded', 'plain', 'floor'];

/** A failure's cause chain in one line: `WorkflowFailedError: … <- ActivityFailure: … <- …`. */
function describeFailure(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err; e instanceof Error && parts.length < 6; e = e.cause) {
    const type = (e as { type?: unknown }).type;
    parts.push(`${e.name}${typeof type === 'string' ? `(${type})` : ''}: ${e.message}`);
  }
  return parts.length > 0 ? parts.join(' <- ') : String(err);
}

/**
 * Start a Temporal dev server, run one worker with `FireOncePlugin` in this process, and time
 * batches of workflows whose activities are all guarded or all plain, alternating which goes
 * first. The same worker serves both, so the difference is the guard alone. A workflow run that
 * fails is recorded with its cause, and its activities are not counted.
 *
 * @example
 * ```ts
 * import { runE2e } from './run-e2e';
 * void runE2e('redis://127.0.0.1:6379', { reps: 5, workflows: 60, activitiesPerWorkflow: 5,
 *   payload: 'x'.repeat(256), progress: console.log });
 * ```
 */
export async function runE2e(redisUrl: string, opts: E2eOptions): Promise<E2eResult> {
  quietTemporalLogs('ERROR');
  opts.progress('e2e: starting the Temporal dev server');
  const temporal = await startTemporal({ dynamicConfig: FAST_DEV_SERVER });
  const redis = new Redis(redisUrl);
  const prefix = `cost-e2e-${Date.now().toString(36)}`;
  try {
    const plugin = new FireOncePlugin({ redis, keyPrefix: prefix });
    opts.progress('e2e: bundling the workflow');
    const { code } = await bundleWorkflowCode({ workflowsPath: require.resolve('./workflows'), plugins: [plugin], logger: new DefaultLogger('ERROR') });
    const connection = await NativeConnection.connect({ address: temporal.address });
    const clientConnection = await Connection.connect({ address: temporal.address });
    const client = new Client({ connection: clientConnection });
    const taskQueue = prefix;
    const activities = createE2eActivities(opts.payload, redis, `floor-${prefix}`); // outside the plugin's prefix, whose memory is measured
    const worker = await Worker.create({ connection, taskQueue, activities, workflowBundle: { code }, plugins: [plugin] });
    const running = worker.run();
    let guardedBatches = 0;
    const failures: string[] = [];
    const redisCpu = async () => {
      const info = await redis.info('cpu');
      const field = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? 0);
      return (field('used_cpu_sys') + field('used_cpu_user')) * 1e6;
    };
    const batch = async (kind: E2eKind, tag: string, workflows: number): Promise<BatchResult> => {
      if (kind === 'guarded') guardedBatches += workflows;
      const cpuBefore = process.cpuUsage();
      const redisBefore = await redisCpu();
      const start = process.hrtime.bigint();
      const handles = await Promise.all(
        Array.from({ length: workflows }, (_, i) =>
          client.workflow.start(costWorkflow, { taskQueue, workflowId: `${prefix}-${tag}-${i}`, args: [kind, `${tag}-${i}`, opts.activitiesPerWorkflow] }),
        ),
      );
      const settled = await Promise.allSettled(handles.map((h) => h.result()));
      const seconds = Number(process.hrtime.bigint() - start) / 1e9;
      const cpu = process.cpuUsage(cpuBefore);
      const redisCpuUs = (await redisCpu()) - redisBefore;
      let completed = 0;
      for (const outcome of settled) {
        if (outcome.status === 'fulfilled') completed += outcome.value;
        else failures.push(`${kind}: ${describeFailure(outcome.reason)}`);
      }
      const activities = Math.max(completed, 1);
      return { rate: completed / seconds, seconds, cpuUs: (cpu.user + cpu.system + redisCpuUs) / activities, redisCpuUs: redisCpuUs / activities };
    };
    try {
      opts.progress('e2e: warm-up');
      for (const kind of KINDS) await batch(kind, `warm-${kind}`, Math.ceil(opts.workflows / 2));
      const reps: E2eRep[] = [];
      for (let rep = 0; rep < opts.reps; rep++) {
        opts.progress(`e2e: rep ${rep + 1}/${opts.reps}`);
        // Each kind goes first, second and third in turn.
        const ran: Partial<Record<E2eKind, BatchResult>> = {};
        for (let k = 0; k < KINDS.length; k++) {
          const kind = KINDS[(rep + k) % KINDS.length];
          ran[kind] = await batch(kind, `r${rep}-${kind}`, opts.workflows);
        }
        reps.push(ran as E2eRep);
      }
      let profile: OriginTime[] | undefined;
      if (opts.profileDir !== undefined) {
        opts.progress(`e2e: profiling four batches of each kind into ${opts.profileDir}`);
        profile = await profileByOrigin(
          KINDS,
          async (kind) => {
            for (let b = 0; b < 4; b++) await batch(kind, `profile-${kind}-${b}`, opts.workflows);
            return 4 * opts.workflows * opts.activitiesPerWorkflow;
          },
          opts.profileDir,
        );
      }
      opts.progress('e2e: counting Redis commands per guarded activity');
      const counter = new CommandCounter();
      counter.start();
      const from = counter.mark();
      const countWorkflows = Math.min(10, opts.workflows);
      try {
        await batch('guarded', 'count', countWorkflows);
      } finally {
        counter.stop();
      }
      const names = counter.between(from, counter.mark());
      const commandNames: Record<string, number> = {};
      for (const name of names) commandNames[name] = (commandNames[name] ?? 0) + 1;
      const artifacts = (await scanKeys(redis, `${prefix}:v3:*:a:*`)).length;
      const guardedActivities = guardedBatches * opts.activitiesPerWorkflow;
      const seconds = (kind: E2eKind) => reps.reduce((sum, r) => sum + r[kind].seconds, 0);
      const medianOf = (pick: (r: E2eRep) => number) => median(reps.map(pick));
      const ratios = reps.map((r) => r.guarded.rate / r.plain.rate);
      return {
        temporalSource: temporal.source,
        guardedPerSec: medianOf((r) => r.guarded.rate),
        plainPerSec: medianOf((r) => r.plain.rate),
        ratio: median(ratios),
        pooledRatio: seconds('plain') / seconds('guarded'),
        ratioRange: [Math.min(...ratios), Math.max(...ratios)],
        cpuUsPerActivity: {
          guarded: medianOf((r) => r.guarded.cpuUs),
          plain: medianOf((r) => r.plain.cpuUs),
          redisGuarded: medianOf((r) => r.guarded.redisCpuUs),
          redisPlain: medianOf((r) => r.plain.redisCpuUs),
        },
        floor: {
          perSec: medianOf((r) => r.floor.rate),
          overPlainPooled: seconds('plain') / seconds('floor'),
          guardedOverFloorPooled: seconds('floor') / seconds('guarded'),
          cpuUs: medianOf((r) => r.floor.cpuUs),
          redisCpuUs: medianOf((r) => r.floor.redisCpuUs),
        },
        commandsPerGuardedActivity: names.length / (countWorkflows * opts.activitiesPerWorkflow),
        commandNames,
        memoryPerGuardedActivity: await memoryPerStep(redis, [`${prefix}*`], guardedActivities, 0, LOCK_TTL_MS),
        failures,
        artifacts,
        expectedArtifacts: guardedActivities,
        reps,
        ...(profile ? { profile } : {}),
      };
    } finally {
      worker.shutdown();
      await running;
      await clientConnection.close();
      await connection.close();
    }
  } finally {
    redis.disconnect();
    await temporal.stop();
  }
}
