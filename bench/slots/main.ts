// Worker slots under a burst: 40 runs of one scope with a 4 s job on workers with 10 activity
// slots each, and 10 unrelated 10 ms activities scheduled 300 ms into the burst. One row per
// in-flight policy, plus a control with no burst, on one worker process and on two (one task
// queue each), measured side by side in one run (rows interleaved per repetition) on a Temporal
// dev server and a redis-server started here. Prints the tables and writes bench/out/slots.json.
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { Command, InvalidArgumentError } from 'commander';
import { Redis } from 'ioredis';
import { FAST_DEV_SERVER, startRedis, startTemporal, startWorkerProcess, stopChild } from '../../sample-workflows/services';
import { bundleSampleWorkflows, quietTemporalLogs } from '../../sample-workflows/shared/temporal';
import { positiveInt } from '../shared/args';
import { report, ROWS, type Measured, type Row } from './report';
import { runScenario } from './scenario';

const workerCounts = (value: string): number[] => {
  const counts = value.split(',').map(Number);
  if (counts.some((n) => !Number.isInteger(n) || n < 1))
    throw new InvalidArgumentError(`must be positive integers separated by commas (got ${JSON.stringify(value)})`);
  return counts;
};

const rowNames = (value: string): Row[] => {
  const rows = value.split(',') as Row[];
  const unknown = rows.filter((r) => !(r in ROWS));
  if (unknown.length > 0 || !rows.includes('control'))
    throw new InvalidArgumentError(`must be rows of ${Object.keys(ROWS).join(', ')}, control included (got ${JSON.stringify(value)})`);
  return rows;
};

const program = new Command('bench:slots')
  .description('Worker slots under a burst of one scope: each in-flight policy against a no-burst control, on one and two worker processes, in one run')
  .option('--runs <n>', 'runs of the one scope in the burst', positiveInt, 40)
  .option('--job-ms <n>', "the job's duration", positiveInt, 4_000)
  .option('--slots <n>', 'maxConcurrentActivityTaskExecutions of each worker process', positiveInt, 10)
  .option('--workers <counts>', 'worker processes on the task queue, one set of rows per count', workerCounts, [1, 2])
  .option('--rows <rows>', 'which rows, control included', rowNames, Object.keys(ROWS) as Row[])
  .option('--unrelated <n>', 'unrelated 10 ms activities', positiveInt, 10)
  .option('--unrelated-at-ms <n>', 'when they are scheduled, after the burst starts', positiveInt, 300)
  .option('--reps <n>', 'repetitions, rows interleaved', positiveInt, 2)
  .option('--out <dir>', 'where slots.json goes', join(__dirname, '..', 'out'));

export interface Options {
  runs: number;
  jobMs: number;
  slots: number;
  workers: number[];
  rows: Row[];
  unrelated: number;
  unrelatedAtMs: number;
  reps: number;
  out: string;
}

async function main(): Promise<void> {
  const o = program.parse(process.argv).opts<Options>();
  quietTemporalLogs('ERROR');
  const [redisService, temporal] = await Promise.all([startRedis(), startTemporal({ dynamicConfig: FAST_DEV_SERVER })]);
  const redis = new Redis(redisService.url);
  const prefix = `bench-slots-${randomUUID().slice(0, 8)}`;
  const bundleDir = mkdtempSync(join(tmpdir(), 'bench-slots-'));
  const connection = await Connection.connect({ address: temporal.address });
  const client = new Client({ connection });
  const children: ChildProcess[] = [];
  const measured: Measured[] = [];
  try {
    const bundlePath = join(bundleDir, 'workflows.js');
    writeFileSync(bundlePath, (await bundleSampleWorkflows(require.resolve('./workflows'))).code);
    const queues = new Map(o.workers.map((n) => [n, `bench-slots-${n}-${randomUUID()}`]));
    for (const [n, taskQueue] of queues) {
      const env = {
        TEMPORAL_ADDRESS: temporal.address,
        REDIS_URL: redisService.url,
        KEY_PREFIX: prefix,
        TASK_QUEUE: taskQueue,
        SLOTS: String(o.slots),
        WORKFLOW_BUNDLE: bundlePath,
      };
      for (let i = 0; i < n; i++) children.push(await startWorkerProcess(join(__dirname, 'worker.ts'), env));
      await runScenario(undefined, { ...o, unrelated: 2 * n }, client, taskQueue, redis, prefix); // warm up
    }
    const rows = o.workers.flatMap((workers) => o.rows.map((row) => ({ workers, row })));
    for (let rep = 1; rep <= o.reps; rep++) {
      for (const { workers, row } of rep % 2 ? rows : [...rows].reverse()) {
        process.stderr.write(`[bench:slots] rep ${rep}/${o.reps} ${workers} worker process(es) ${row}\n`);
        measured.push({ workers, row, ...(await runScenario(ROWS[row], o, client, queues.get(workers) as string, redis, prefix)) });
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  } finally {
    await Promise.all(children.map((child) => stopChild(child)));
    await connection.close();
    redis.disconnect();
    rmSync(bundleDir, { recursive: true, force: true });
    await Promise.all([temporal.stop(), redisService.stop()]);
  }
  report(o, measured);
}

main().catch((err) => {
  console.error(err instanceof Error ? (err.stack ?? err.message) : err);
  process.exit(1);
});
