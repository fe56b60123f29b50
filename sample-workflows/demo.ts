/**
 * `npm run demo`: the seed's bug and its fix, side by side. One chat session gets a burst of
 * new workflow runs while its summary job is in flight, once without the guard and once with
 * it, and the table counts how many times the job was dispatched.
 *
 * Both runs also write the dispatch log: the unguarded one through `observeOnly` under the key
 * prefix `<base>-unguarded`, the guarded one under `<base>-guarded` (`<base>` is
 * `DEMO_KEY_PREFIX`, default `demo`). With `REDIS_URL` set the logs are left in place, so that
 * `npx fire-once report --prefix demo-unguarded` flags the session and `--prefix demo-guarded`
 * shows no duplicate.
 *
 * Redis: `REDIS_URL`, else `redis-server` on PATH, else an embedded one through
 * redis-memory-server (`services/embedded-redis.ts`); the `services:` line says which.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, type WorkflowBundle } from '@temporalio/worker';
import Table from 'cli-table3';
import { Redis } from 'ioredis';
import { withRedisAndTemporal, type RedisService, type TemporalService } from './services';
import { chatKeys, type JobTimings } from './chat-session/config';
import { createChatWorker } from './chat-session/worker';
import { startJobRunner } from './chat-session/job-runner';
import { sendBurst, type Strategy } from './chat-session/client';
import { runMain } from './shared/env';
import { bundleSampleWorkflows, quietTemporalLogs } from './shared/temporal';
import { deleteKeysUnder, readCount } from './shared/redis';
import { FireOnceKeys } from '../src/core';

const INVOCATIONS = 8;
const SPACING_MS = 7; // 8 runs within about 50 ms, as in the seed's measurement
const TIMINGS: JobTimings = { jobMs: 2_000, artifactDelayMs: 500 };

/** What one strategy did with the burst. */
export interface BurstRow {
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

/** `DEMO_KEY_PREFIX`, else `demo`: the guard's prefixes are `<base>-unguarded` and `<base>-guarded`. */
const BASE_PREFIX = process.env.DEMO_KEY_PREFIX ?? 'demo';

/** The `FireOncePlugin` key prefix of one strategy: where its dispatch log is kept. */
function guardPrefix(strategy: Strategy): string {
  return `${BASE_PREFIX}-${strategy}`;
}

/**
 * One burst on a fresh task queue: a worker and a job runner run while the first message's job
 * is dispatched and the other runs arrive. The sample's own keys (job list, counters, summary)
 * live under a fresh prefix; the guard's under the strategy's fixed one, for a session that is
 * new each time, so no earlier demo's keys or log entries can mix in. Deletes every key it wrote
 * except the dispatch log `<guard prefix>:log`.
 */
async function runBurst(conn: Connections, strategy: Strategy, sessionId: string): Promise<BurstRow> {
  const suffix = randomBytes(4).toString('hex');
  const prefix = `${BASE_PREFIX}-${strategy}-${suffix}`;
  const taskQueue = `demo-chat-${strategy}-${suffix}`;
  const keys = chatKeys(prefix);
  const worker = await createChatWorker({
    connection: conn.native,
    redis: conn.redis,
    taskQueue,
    keyPrefix: prefix,
    guardKeyPrefix: guardPrefix(strategy),
    timings: TIMINGS,
    workflowBundle: conn.workflowBundle,
  });
  const runner = startJobRunner({ redisUrl: conn.redisUrl, keys, ...TIMINGS });
  try {
    const started = Date.now();
    await worker.runUntil(
      sendBurst(conn.client, {
        taskQueue,
        sessionId,
        strategy,
        redis: conn.redis,
        keys,
        invocations: INVOCATIONS,
        spacingMs: SPACING_MS,
      }),
    );
    const wallMs = Date.now() - started;
    return { strategy, invocations: INVOCATIONS, dispatches: await readCount(conn.redis, keys.dispatches), wallMs };
  } finally {
    await runner.stop();
    await deleteKeysUnder(conn.redis, prefix);
    await deleteKeysUnder(conn.redis, new FireOnceKeys(guardPrefix(strategy)).scopeBase(sessionId)); // the lock and fencing counter
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
  if (row.strategy === 'unguarded')
    return `unguarded: ${row.dispatches} of ${row.invocations} runs dispatched the same job; each run believed it was the first.`;
  return `guarded: ${row.dispatches} dispatch; the other ${others} runs found the lock held, skipped the dispatch and read the one summary.`;
}

/** The demo's claim, checked: without the guard the burst duplicates the job, with it the job fires once. */
export function checkClaim(rows: readonly BurstRow[]): string[] {
  const problems: string[] = [];
  const unguarded = rows.find((row) => row.strategy === 'unguarded');
  const guarded = rows.find((row) => row.strategy === 'guarded');
  if (unguarded && unguarded.dispatches <= 1) problems.push(`unguarded dispatched ${unguarded.dispatches} time(s); expected more than 1`);
  if (guarded && guarded.dispatches !== 1) problems.push(`guarded dispatched ${guarded.dispatches} time(s); expected exactly 1`);
  return problems;
}

/** The one line that says how to read the dispatch logs the demo wrote. */
function reportHint(redisService: RedisService): string {
  const build = existsSync(join(__dirname, '..', 'dist', 'cli', 'main.js')) ? '' : 'npm run build, then ';
  const [unguarded, guarded] = [guardPrefix('unguarded'), guardPrefix('guarded')];
  if (redisService.spawned) {
    return `dispatch logs: this Redis stops with the demo; set REDIS_URL to keep them, then ${build}npx fire-once report --prefix ${unguarded} (and --prefix ${guarded})`;
  }
  return `dispatch logs kept in ${redisService.url}: ${build}npx fire-once report --prefix ${unguarded} flags the session; npx fire-once report --prefix ${guarded} shows none`;
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
    const sessionId = `session-${randomBytes(3).toString('hex')}`;
    for (const strategy of ['unguarded', 'guarded'] as const) rows.push(await runBurst(conn, strategy, sessionId));
    printTable(rows);
    for (const row of rows) console.log(explain(row));
    console.log(reportHint(redisService));
    const problems = checkClaim(rows);
    for (const problem of problems) console.error(`demo: ${problem}`);
    return problems.length === 0 ? 0 : 1;
  } finally {
    // quit, not disconnect: it waits for the dispatch log appends still in flight on this connection.
    await redis.quit();
    await connection.close();
    await native.close();
  }
}

if (require.main === module) {
  quietTemporalLogs();
  // Only the demo falls back to an embedded Redis: `npm install && npm run demo` on a bare machine.
  runMain(() => withRedisAndTemporal('demo', demo, { embeddedRedis: true }));
}
