// `npm run bench`: the cost of the fire-once guard against its peers and against a bare
// SET NX PX, on one redis-server started here, plus guarded against plain activities on a real
// worker and dev server. Prints the ratio tables; writes bench/out/cost.json and cost.md.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { Command } from 'commander';
import { positiveInt } from '../shared/args';
import { Redis } from 'ioredis';
import { startRedis } from '../../sample-workflows/services';
import { runCoreBench } from './core-bench';
import { runE2e } from './e2e/run-e2e';
import { describeMachine } from './machine';
import { renderMarkdown, renderTables, type CostReport } from './report';
import { verdict } from './verdict';

const program = new Command('bench')
  .description('Cost of the fire-once guard, side by side with its peers, as ratios to a bare SET NX PX')
  .option('--reps <n>', 'repetitions of the core bench (at least 5 for the published table)', positiveInt, 7)
  .option('--latency-ops <n>', 'decisions timed one at a time per path, guard and repetition', positiveInt, 2000)
  .option('--throughput-ops <n>', 'decisions per throughput run per guard and repetition', positiveInt, 4000)
  .option('--concurrency <n>', 'decisions in flight in the throughput runs', positiveInt, 64)
  .option('--memory-steps <n>', 'committed steps whose keys MEMORY USAGE measures', positiveInt, 1000)
  .option('--round-trip-samples <n>', 'decisions per path whose round trips are counted', positiveInt, 20)
  .option('--payload-bytes <n>', 'size of the stored result', positiveInt, 256)
  .option('--e2e-reps <n>', 'repetitions on the dev server, each a guarded, a plain and a floor batch', positiveInt, 10)
  .option('--e2e-workflows <n>', 'workflow runs per batch', positiveInt, 40)
  .option('--e2e-activities <n>', 'activities per workflow run', positiveInt, 10)
  .option('--skip-e2e', 'skip the end-to-end part (no Temporal dev server)')
  .option('--e2e-profile <dir>', 'also profile the worker main thread over four untimed batches of each kind, writing the profiles to <dir>')
  .option('--out <dir>', 'where cost.json and cost.md go', join(__dirname, '..', 'out'));

async function main(): Promise<void> {
  const opts = program.parse(process.argv).opts();
  const started = Date.now();
  const progress = (line: string) => process.stderr.write(`[bench ${((Date.now() - started) / 1000).toFixed(0).padStart(3)}s] ${line}\n`);
  const payload = randomBytes(opts.payloadBytes).toString('base64url').slice(0, opts.payloadBytes);

  progress('starting redis-server');
  const service = await startRedis();
  const redis = new Redis(service.url);
  const admin = new Redis(service.url);
  try {
    const machine = await describeMachine(admin);
    const core = await runCoreBench(redis, admin, {
      reps: opts.reps,
      latencyOps: opts.latencyOps,
      throughputOps: opts.throughputOps,
      concurrency: opts.concurrency,
      memorySteps: opts.memorySteps,
      roundTripSamples: opts.roundTripSamples,
      payload,
      progress,
    });
    const e2e = opts.skipE2e
      ? undefined
      : await runE2e(service.url, {
          reps: opts.e2eReps,
          workflows: opts.e2eWorkflows,
          activitiesPerWorkflow: opts.e2eActivities,
          payload,
          progress,
          profileDir: opts.e2eProfile,
        });
    const report: CostReport = {
      command: `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
      startedAt: new Date(started).toISOString(),
      seconds: Math.round((Date.now() - started) / 1000),
      loadAverageAtEnd: loadavg().map((l) => Math.round(l * 100) / 100),
      options: { ...opts, out: undefined },
      machine,
      core,
      ...(e2e ? { e2e } : {}),
    };
    mkdirSync(opts.out, { recursive: true });
    writeFileSync(join(opts.out, 'cost.json'), `${JSON.stringify(report, null, 2)}\n`);
    writeFileSync(join(opts.out, 'cost.md'), renderMarkdown(report));
    process.stdout.write(`${renderTables(report)}\n`);
    progress(`done in ${report.seconds}s; wrote ${join(opts.out, 'cost.json')} and cost.md`);
    const measures = verdict(report);
    if (measures.some((m) => !m.ok)) process.exitCode = 1;
  } finally {
    redis.disconnect();
    admin.disconnect();
    await service.stop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
