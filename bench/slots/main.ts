// Worker slots under a burst: 40 runs of one scope with a 4 s job on a worker with 10 activity
// slots, and 10 unrelated 10 ms activities scheduled 300 ms into the burst. One row per in-flight
// policy, plus a control with no burst, measured side by side in one run (rows interleaved per
// repetition) on a Temporal dev server and a redis-server started here. Prints the table and
// writes bench/out/slots.json.
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Runtime, DefaultLogger, Worker } from '@temporalio/worker';
import Table from 'cli-table3';
import { Command } from 'commander';
import { Redis } from 'ioredis';
import { FireOncePlugin } from '../../src';
import { FAST_DEV_SERVER, startRedis, startTemporal } from '../../sample-workflows/services';
import { positiveInt } from '../shared/args';
import { countingInterceptor, createActivities, type Records } from './activities';
import type { Policy } from './workflows';

const ROWS = { control: undefined, park: 'jobPark', wait: 'jobWait', fail: 'jobFail', skip: 'jobSkip' } as const satisfies Record<string, Policy | undefined>;
type Row = keyof typeof ROWS;
const LABELS: Record<Row, string> = {
  control: 'no burst (control)',
  park: "'park' (new default)",
  wait: "'wait' (in slot)",
  fail: "'fail'",
  skip: "'skip'",
};

const program = new Command('bench:slots')
  .description('Worker slots under a burst of one scope: each in-flight policy against a no-burst control, in one run')
  .option('--runs <n>', 'runs of the one scope in the burst', positiveInt, 40)
  .option('--job-ms <n>', "the job's duration", positiveInt, 4_000)
  .option('--slots <n>', "the worker's maxConcurrentActivityTaskExecutions", positiveInt, 10)
  .option('--unrelated <n>', 'unrelated 10 ms activities', positiveInt, 10)
  .option('--unrelated-at-ms <n>', 'when they are scheduled, after the burst starts', positiveInt, 300)
  .option('--reps <n>', 'repetitions, rows interleaved', positiveInt, 2)
  .option('--out <dir>', 'where slots.json goes', join(__dirname, '..', 'out'));

interface Options {
  runs: number;
  jobMs: number;
  slots: number;
  unrelated: number;
  unrelatedAtMs: number;
  reps: number;
  out: string;
}

interface Sample {
  readonly row: Row;
  readonly scheduleToStartMs: number[];
  readonly burstDoneMs?: number;
  readonly executions: number;
  readonly dispatches: number;
  readonly waiterSlotSeconds: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? NaN : sorted[Math.floor((sorted.length - 1) / 2)];
};

async function scenario(row: Row, o: Options, client: Client, taskQueue: string, redis: Redis, prefix: string, records: Records): Promise<Sample> {
  const scope = `${row}-${randomUUID()}`;
  const policy = ROWS[row];
  const start = (workflow: 'burstRun' | 'unrelatedRun', args: unknown[]) =>
    client.workflow.start(workflow, { taskQueue, workflowId: `${workflow}-${randomUUID()}`, args } as never);
  const t0 = performance.now();
  const burst =
    policy === undefined
      ? []
      : Array.from({ length: o.runs }, async () => {
          const handle = await start('burstRun', [scope, o.jobMs, policy]);
          await handle.result();
          return performance.now() - t0;
        });
  await sleep(o.unrelatedAtMs);
  const unrelated = await Promise.all(Array.from({ length: o.unrelated }, () => start('unrelatedRun', [scope])));
  const done = await Promise.all(burst);
  await Promise.all(unrelated.map((h) => h.result()));
  const executions = records.executions.filter((e) => e.scope === scope);
  return {
    row,
    scheduleToStartMs: records.scheduleToStartMs.get(scope) ?? [],
    ...(done.length > 0 ? { burstDoneMs: Math.max(...done) } : {}),
    executions: executions.length,
    dispatches: Number((await redis.get(`${prefix}:dispatches:${scope}`)) ?? 0),
    waiterSlotSeconds: executions.filter((e) => !e.dispatched).reduce((sum, e) => sum + e.ms, 0) / 1000,
  };
}

async function main(): Promise<void> {
  const o = program.parse(process.argv).opts<Options>();
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const [redisService, temporal] = await Promise.all([startRedis(), startTemporal({ dynamicConfig: FAST_DEV_SERVER })]);
  const redis = new Redis(redisService.url);
  const prefix = `bench-slots-${randomUUID().slice(0, 8)}`;
  const taskQueue = `bench-slots-${randomUUID()}`;
  const records: Records = { executions: [], scheduleToStartMs: new Map() };
  const native = await NativeConnection.connect({ address: temporal.address });
  const connection = await Connection.connect({ address: temporal.address });
  const client = new Client({ connection });
  const samples: Sample[] = [];
  try {
    const worker = await Worker.create({
      connection: native,
      taskQueue,
      activities: createActivities(redis, prefix, records),
      workflowsPath: require.resolve('./workflows'),
      plugins: [new FireOncePlugin({ redis, keyPrefix: prefix })],
      interceptors: { activity: [countingInterceptor(records)] },
      maxConcurrentActivityTaskExecutions: o.slots,
    });
    await worker.runUntil(async () => {
      await scenario('control', { ...o, unrelated: 1 }, client, taskQueue, redis, prefix, records); // warm up
      const rows = Object.keys(ROWS) as Row[];
      for (let rep = 1; rep <= o.reps; rep++) {
        for (const row of rep % 2 ? rows : [...rows].reverse()) {
          process.stderr.write(`[bench:slots] rep ${rep}/${o.reps} ${row}\n`);
          samples.push(await scenario(row, o, client, taskQueue, redis, prefix, records));
          await sleep(500);
        }
      }
    });
  } finally {
    await connection.close();
    await native.close();
    redis.disconnect();
    await Promise.all([temporal.stop(), redisService.stop()]);
  }
  report(o, samples);
}

function report(o: Options, samples: readonly Sample[]): void {
  const of = (row: Row) => samples.filter((s) => s.row === row);
  const controlP50 = median(of('control').flatMap((s) => s.scheduleToStartMs));
  const table = new Table({
    head: ['', 'unrelated schedule-to-start p50 ms', 'vs control', 'burst done after ms', 'executions', 'dispatches', 'waiter slot-s'],
    style: { head: [], border: [] },
  });
  const summary = (Object.keys(ROWS) as Row[]).map((row) => {
    const rs = of(row);
    const p50 = median(rs.flatMap((s) => s.scheduleToStartMs));
    const each = (f: (s: Sample) => number | undefined, digits = 0) => rs.map((s) => f(s)?.toFixed(digits) ?? '-').join(' / ');
    table.push([
      LABELS[row],
      p50.toFixed(0),
      (p50 / controlP50).toFixed(2),
      each((s) => s.burstDoneMs),
      each((s) => s.executions),
      each((s) => s.dispatches),
      each((s) => s.waiterSlotSeconds, 1),
    ]);
    return { row, scheduleToStartP50Ms: p50, samples: rs };
  });
  console.log(
    `\nbench:slots: ${o.runs} runs of one scope, ${o.jobMs} ms job, ${o.slots} activity slots, ${o.unrelated} unrelated 10 ms activities at +${o.unrelatedAtMs} ms; ` +
      `${o.reps} repetitions (values: one per repetition); ${cpus().length} CPUs (${cpus()[0]?.model ?? 'unknown'})\n`,
  );
  console.log(table.toString());
  mkdirSync(o.out, { recursive: true });
  writeFileSync(join(o.out, 'slots.json'), JSON.stringify({ options: o, summary }, null, 2));
}

main().catch((err) => {
  console.error(err instanceof Error ? (err.stack ?? err.message) : err);
  process.exit(1);
});
