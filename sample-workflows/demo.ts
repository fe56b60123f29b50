/**
 * `npm run demo`: the seed's bug and its fix, side by side. One chat session gets a burst of
 * new workflow runs while its summary job is in flight, once without the guard and once with
 * it, and the table counts how many times the job was dispatched.
 */
import { randomBytes } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, type WorkflowBundle } from '@temporalio/worker';
import Table from 'cli-table3';
import { Redis } from 'ioredis';
import { ServiceUnavailableError, startRedis, startTemporal, type RedisService, type TemporalService } from './services';
import { chatKeys, type JobTimings } from './chat-session/config';
import { createChatWorker } from './chat-session/worker';
import { startJobRunner } from './chat-session/job-runner';
import { sendBurst, type Strategy } from './chat-session/client';
import { bundleSampleWorkflows, quietTemporalLogs } from './shared/temporal';
import { deleteKeysUnder, readCount } from './shared/redis';

const INVOCATIONS = 8;
const SPACING_MS = 7; // 8 runs within about 50 ms, as in the seed's measurement
const TIMINGS: JobTimings = { jobMs: 2_000, artifactDelayMs: 500 };

/** What one strategy did with the burst. */
interface BurstRow {
  readonly strategy: Strategy;
  readonly invocations: number;
  readonly dispatches: number;
  readonly wallMs: number;
}

/** The connections the demo holds; all closed at the end. */
interface Connections {
  readonly redisUrl: string;
  readonly redis: Redis;
  readonly native: NativeConnection;
  readonly client: Client;
  readonly workflowBundle: WorkflowBundle;
}

/**
 * One burst on a fresh key prefix and task queue: a worker and a job runner run while the
 * first message's job is dispatched and the other runs arrive. Deletes its keys afterwards.
 */
async function runBurst(conn: Connections, strategy: Strategy): Promise<BurstRow> {
  const suffix = randomBytes(4).toString('hex');
  const prefix = `demo-${strategy}-${suffix}`;
  const taskQueue = `demo-chat-${strategy}-${suffix}`;
  const keys = chatKeys(prefix);
  const worker = await createChatWorker({
    connection: conn.native, redis: conn.redis, taskQueue, keyPrefix: prefix, timings: TIMINGS, workflowBundle: conn.workflowBundle,
  });
  const runner = startJobRunner({ redisUrl: conn.redisUrl, keys, ...TIMINGS });
  try {
    const started = Date.now();
    await worker.runUntil(
      sendBurst(conn.client, {
        taskQueue, sessionId: 'session-42', strategy, redis: conn.redis, keys, invocations: INVOCATIONS, spacingMs: SPACING_MS,
      }),
    );
    const wallMs = Date.now() - started;
    return { strategy, invocations: INVOCATIONS, dispatches: await readCount(conn.redis, keys.dispatches), wallMs };
  } finally {
    await runner.stop();
    await deleteKeysUnder(conn.redis, prefix);
  }
}

function printTable(rows: readonly BurstRow[]): void {
  // No colours: the table should read the same in a terminal, a CI log or a file.
  const table = new Table({ head: ['strategy', 'invocations', 'dispatches', 'wall ms'], style: { head: [], border: [] } });
  for (const row of rows) table.push([row.strategy, row.invocations, row.dispatches, row.wallMs]);
  console.log(table.toString());
}

function explain(row: BurstRow): string {
  const others = row.invocations - row.dispatches;
  if (row.strategy === 'unguarded') return `unguarded: ${row.dispatches} of ${row.invocations} runs dispatched the same job; each run believed it was the first.`;
  return `guarded: ${row.dispatches} dispatch; the other ${others} runs found the lock held, skipped the dispatch and read the one summary.`;
}

/** The demo's claim, checked: without the guard the burst duplicates the job, with it the job fires once. */
function checkClaim(rows: readonly BurstRow[]): string[] {
  const problems: string[] = [];
  const unguarded = rows.find((row) => row.strategy === 'unguarded');
  const guarded = rows.find((row) => row.strategy === 'guarded');
  if (unguarded && unguarded.dispatches <= 1) problems.push(`unguarded dispatched ${unguarded.dispatches} time(s); expected more than 1`);
  if (guarded && guarded.dispatches !== 1) problems.push(`guarded dispatched ${guarded.dispatches} time(s); expected exactly 1`);
  return problems;
}

async function demo(redisService: RedisService, temporal: TemporalService): Promise<number> {
  const redis = new Redis(redisService.url);
  const native = await NativeConnection.connect({ address: temporal.address });
  const connection = await Connection.connect({ address: temporal.address });
  try {
    console.log('bundling the chat-session workflows...');
    const workflowBundle = await bundleSampleWorkflows(require.resolve('./chat-session/workflows'));
    const conn: Connections = { redisUrl: redisService.url, redis, native, client: new Client({ connection }), workflowBundle };
    console.log(
      `\n${INVOCATIONS} messages to one chat session, each a new workflow run, ${SPACING_MS} ms apart while the first one's ` +
        `summary job is in flight (job ${TIMINGS.jobMs} ms, artifact written ${TIMINGS.artifactDelayMs} ms after it resolves)\n`,
    );
    const rows: BurstRow[] = [];
    for (const strategy of ['unguarded', 'guarded'] as const) rows.push(await runBurst(conn, strategy));
    printTable(rows);
    for (const row of rows) console.log(explain(row));
    const problems = checkClaim(rows);
    for (const problem of problems) console.error(`demo: ${problem}`);
    return problems.length === 0 ? 0 : 1;
  } finally {
    redis.disconnect();
    await connection.close();
    await native.close();
  }
}

async function main(): Promise<number> {
  quietTemporalLogs();
  let redisService: RedisService | undefined;
  let temporal: TemporalService | undefined;
  try {
    redisService = await startRedis();
    temporal = await startTemporal();
    console.log(`services: redis ${redisService.url}, temporal ${temporal.address} (${temporal.source})`);
    return await demo(redisService, temporal);
  } catch (err) {
    if (!(err instanceof ServiceUnavailableError)) throw err;
    console.error(`demo: ${err.message}`);
    return 1;
  } finally {
    await temporal?.stop();
    await redisService?.stop();
  }
}

// Every service is stopped and every connection closed above, so the process ends by itself.
main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  },
);
