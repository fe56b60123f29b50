/**
 * `npm run bench:native`: the plugin against Temporal's own answer, side by side on one worker
 * and one dev server. A step runs three ways: a plain activity, the `FireOncePlugin`-guarded
 * activity, and the Temporal-native idiom (a job workflow `job:{scope}:{step}` with
 * USE_EXISTING + ALLOW_DUPLICATE_FAILED_ONLY, `../shared/native-job.ts`). Prints fresh- and
 * completed-step latency, throughput at 32 in flight, history events per step, and what happens
 * when the job fails while runs wait on it; writes bench/out/native.json. `--help` lists the flags.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Worker, bundleWorkflowCode } from '@temporalio/worker';
import { Command } from 'commander';
import { Redis } from 'ioredis';
import { startRedis, startTemporal, type RedisService, type TemporalService } from '../../sample-workflows/services';
import { deleteKeysUnder, readCount } from '../../sample-workflows/shared/redis';
import { quietTemporalLogs } from '../../sample-workflows/shared/temporal';
import { FireOncePlugin } from '../../src';
import { describeMachine } from '../cost/machine';
import { nonNegativeInt, positiveInt } from '../shared/args';
import { FAILURE_VARIANTS, VARIANTS, counterKeys, createNativeBenchActivities, type Variant } from './activities';
import { failureWhileWaiting, type FailureOutcome } from './failure';
import { countHistory, measureLatency, measureThroughput, scopeOf, type StepRunner } from './measure';
import { renderNative, type NativeResults } from './report';

const TRANSFER_RPS = 'history.transferProcessorMaxPollRPS';

const program = new Command('bench:native')
  .description('FireOncePlugin against a plain activity and the Temporal-native job workflow idiom, on one dev server')
  .option('--samples <n>', 'latency samples per variant, fresh and completed', positiveInt, 200)
  .option('--steps <n>', 'fresh steps per variant in each throughput repetition', positiveInt, 200)
  .option('--in-flight <n>', 'workflow runs in flight in the throughput runs', positiveInt, 32)
  .option('--reps <n>', 'throughput repetitions, variant order rotated', positiveInt, 5)
  .option('--waiters <n>', 'runs that arrive while the failing job is in flight', positiveInt, 4)
  .option('--flaky-job-ms <ms>', 'how long the failing job runs before it fails', positiveInt, 1_000)
  .option('--transfer-poll-rps <n>', `the dev server's ${TRANSFER_RPS} (0: leave the server's default)`, nonNegativeInt, 10_000)
  .option('--out <dir>', 'where native.json goes', join(__dirname, '..', 'out'));

interface Opts {
  samples: number;
  steps: number;
  inFlight: number;
  reps: number;
  waiters: number;
  flakyJobMs: number;
  transferPollRps: number;
  out: string;
}

/** The one line that says how the dev server was started, or that we could not choose. */
function serverLine(temporal: TemporalService, rps: number): string {
  if (temporal.source === 'env') return `Temporal: TEMPORAL_ADDRESS=${temporal.address}; its dynamic config is not ours to set (${TRANSFER_RPS} unknown)`;
  const how = rps > 0 ? `--dynamic-config-value ${TRANSFER_RPS}=${rps}` : `no --dynamic-config-value (${TRANSFER_RPS} at the server default)`;
  return `Temporal: dev server (${temporal.source}) started by the bench with ${how}`;
}

async function run(opts: Opts, redisService: RedisService, temporal: TemporalService, progress: (line: string) => void): Promise<NativeResults> {
  const redis = new Redis(redisService.url);
  const prefix = `bench-native-${randomBytes(4).toString('hex')}`;
  const connection = await NativeConnection.connect({ address: temporal.address });
  const clientConnection = await Connection.connect({ address: temporal.address });
  const client = new Client({ connection: clientConnection });
  try {
    const plugin = new FireOncePlugin({ redis, keyPrefix: prefix });
    progress('bundling the workflows');
    const { code } = await bundleWorkflowCode({ workflowsPath: require.resolve('./workflows'), plugins: [plugin], logger: new DefaultLogger('ERROR') });
    const activities = createNativeBenchActivities({ redis, client, prefix, payload: 'x'.repeat(256), flakyJobMs: opts.flakyJobMs });
    const worker = await Worker.create({ connection, taskQueue: prefix, activities, workflowBundle: { code }, plugins: [plugin] });
    const runner: StepRunner = { client, taskQueue: prefix, prefix, progress };
    return await worker.runUntil(async () => {
      progress('warm-up');
      for (let i = 0; i < 5; i++) {
        for (const variant of VARIANTS) {
          const scope = scopeOf(runner, 'warm', variant, i);
          await client.workflow.execute('oneStep', { taskQueue: prefix, workflowId: `${prefix}-warm-${variant}-${i}`, args: [variant, scope] });
        }
      }
      const before = await jobRunCounts(redis, prefix);
      const latency = await measureLatency(runner, opts.samples);
      const after = await jobRunCounts(redis, prefix);
      const jobRuns = Object.fromEntries(VARIANTS.map((v) => [v, after[v] - before[v]])) as Record<Variant, number>;
      progress('history events per step');
      const history = await countHistory(runner, Math.min(10, opts.samples));
      const throughput: Record<Variant, number[]> = { plain: [], plugin: [], native: [] };
      for (let rep = 0; rep < opts.reps; rep++) {
        for (let k = 0; k < VARIANTS.length; k++) {
          const variant = VARIANTS[(rep + k) % VARIANTS.length];
          progress(`throughput: rep ${rep + 1}/${opts.reps} ${variant}`);
          throughput[variant].push(await measureThroughput(runner, variant, opts.steps, opts.inFlight, `r${rep}`));
        }
      }
      const failure: FailureOutcome[] = [];
      for (const variant of FAILURE_VARIANTS) {
        progress(`failure while waiting: ${variant}`);
        failure.push(await failureWhileWaiting(runner, redis, variant, opts.waiters));
      }
      return { latency, throughput, history, jobRuns, failure };
    });
  } finally {
    await deleteKeysUnder(redis, prefix);
    redis.disconnect();
    await clientConnection.close();
    await connection.close();
  }
}

async function jobRunCounts(redis: Redis, prefix: string): Promise<Record<Variant, number>> {
  const counts = await Promise.all(VARIANTS.map((v) => readCount(redis, counterKeys.runs(prefix, v))));
  return Object.fromEntries(VARIANTS.map((v, i) => [v, counts[i]])) as Record<Variant, number>;
}

/** The bench's own check: a completed step must not run the job again, except as a plain activity. */
function check(r: NativeResults, samples: number): string[] {
  const problems: string[] = [];
  const expected: Record<Variant, number> = { plain: 2 * samples, plugin: samples, native: samples };
  for (const v of VARIANTS)
    if (r.jobRuns[v] !== expected[v]) problems.push(`${v}: the job ran ${r.jobRuns[v]} times in the latency phase; expected ${expected[v]}`);
  return problems;
}

async function main(): Promise<number> {
  const opts = program.parse(process.argv).opts<Opts>();
  const started = Date.now();
  const progress = (line: string) => process.stderr.write(`[bench:native ${((Date.now() - started) / 1000).toFixed(0).padStart(3)}s] ${line}\n`);
  quietTemporalLogs('ERROR');
  const redisService = await startRedis();
  let temporal: TemporalService | undefined;
  try {
    const rps = opts.transferPollRps;
    temporal = await startTemporal({ dynamicConfig: rps > 0 ? { [TRANSFER_RPS]: rps } : {} });
    const admin = new Redis(redisService.url);
    const machine = await describeMachine(admin).finally(() => admin.disconnect());
    const command = `npm run bench:native${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`;
    const header = [
      `command: ${command}`,
      `machine: ${machine.nproc} cores (${machine.cpuModel}), Node ${machine.node}, redis-server ${machine.redis} (${redisService.description}), commit ${machine.gitHead}`,
      serverLine(temporal, rps),
      `load average at start: ${machine.loadAverage.join(', ')}`,
    ];
    for (const line of header) console.log(line);
    const results = await run(opts, redisService, temporal, progress);
    const loadAtEnd = loadavg().map((l) => Math.round(l * 100) / 100);
    console.log(`\n${renderNative(results, opts)}\n\nload average at end: ${loadAtEnd.join(', ')}; ${Math.round((Date.now() - started) / 1000)} s`);
    mkdirSync(opts.out, { recursive: true });
    const report = {
      benchmark: 'native',
      command,
      startedAt: new Date(started).toISOString(),
      machine,
      server: serverLine(temporal, rps),
      loadAverageAtEnd: loadAtEnd,
      options: { ...opts, out: undefined },
      results,
    };
    writeFileSync(join(opts.out, 'native.json'), `${JSON.stringify(report, null, 2)}\n`);
    progress(`wrote ${join(opts.out, 'native.json')}`);
    const problems = check(results, opts.samples);
    for (const problem of problems) console.error(`FAIL: ${problem}`);
    return problems.length === 0 ? 0 : 1;
  } finally {
    await temporal?.stop();
    await redisService.stop();
  }
}

main().then(
  (code) => (process.exitCode = code),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
