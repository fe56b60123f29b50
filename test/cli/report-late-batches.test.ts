import { MockActivityEnvironment } from '@temporalio/testing';
import { Redis } from 'ioredis';
import { FireOnceGuard, FireOncePlugin, fireOnce } from '../../src';
import { DispatchLog, createFireOnceActivityInterceptor, fireOnceActivityMap, parseEvent } from '../../src/core';
import { appendEvent } from '../../src/cli/log';
import { connectRedis, deletePrefix, readCount, testPrefix } from '../support/redis';
import { runCli } from './run-cli';

// Workers send their dispatch-log entries in batches, about 20 ms after the decision and later
// when Redis is slow, so a batch can land after an `invalidated` entry written after the dispatch
// it describes. `fire-once report` must still count each dispatch on its own side of the
// invalidation. Here each worker is the real activity interceptor with a DispatchLog of its own
// connection; a worker's batch is held by a BLPOP sent ahead of it on that connection (Redis
// answers one connection's commands in order) until the test pushes to the list. Dispatches are
// counted by an INCR in the activity, which the guard does not own.
jest.setTimeout(300_000);

describe('fire-once report: batches that land after an invalidation', () => {
  let redis: Redis;
  let url: string;
  let prefix: string;
  const clients: Redis[] = [];
  const scope = 'session-1';

  beforeAll(() => {
    redis = connectRedis();
    url = process.env.REDIS_URL!;
  });
  beforeEach(() => {
    prefix = testPrefix('report-late');
  });
  afterEach(async () => {
    for (const client of clients.splice(0)) client.disconnect();
    await deletePrefix(redis, prefix);
  });
  afterAll(() => redis.quit());

  const counterKey = () => `${prefix}:test:dispatches`;
  const logKey = () => new FireOnceGuard({ redis, keyPrefix: prefix }).keys.log();
  const cli = (...args: string[]) => runCli([...args, '--prefix', prefix, '--redis', url]);

  function connection(): Redis {
    const client = new Redis(url);
    clients.push(client);
    return client;
  }

  /**
   * Hold every command sent on `client` from now on, until the returned function is called with
   * the flush of the log batch held: it resolves once Redis has taken the whole batch.
   */
  function hold(client: Redis): (flushed: Promise<number>) => Promise<void> {
    const list = `${prefix}:test:hold:${clients.indexOf(client)}`;
    const blocked = client.blpop(list, 0);
    return async (flushed) => {
      await redis.lpush(list, 'go');
      await blocked;
      expect(await flushed).toBe(0);
    };
  }

  /** A worker: the activity interceptor over a guard, with a dispatch log on a connection of its own. */
  function worker(name: string) {
    const logClient = connection();
    const guard = new FireOnceGuard({ redis, keyPrefix: prefix });
    const log = new DispatchLog(logClient, guard.keys, 10_000);
    let failing = false;
    const activities = {
      summarise: fireOnce(
        async (s: string) => {
          await redis.incr(counterKey());
          if (failing) throw new Error('the job failed');
          return `summary of ${s}`;
        },
        { scope: ([s]) => s, jobType: 'summary' },
      ),
    };
    const interceptors = [createFireOnceActivityInterceptor({ guard, activities: fireOnceActivityMap(activities), dispatchLog: log })];
    return {
      log,
      hold: () => hold(logClient),
      /** Run the activity once; `fail` makes its body throw after counting the dispatch. */
      async run(fail = false): Promise<void> {
        failing = fail;
        const env = new MockActivityEnvironment(
          {
            namespace: 'default',
            activityType: 'summarise',
            attempt: 1,
            activityId: '1',
            workflowExecution: { workflowId: `wf-${name}`, runId: `run-${name}` },
            startToCloseTimeoutMs: 60_000,
            currentAttemptScheduledTimestampMs: Date.now(),
          },
          { interceptors },
        );
        await env.run(activities.summarise, scope).catch((err: unknown) => {
          if (!fail) throw err;
        });
      },
    };
  }

  /** The decisions in the stream, in stream order, with the workflow ID of each. */
  async function streamOrder(): Promise<string[]> {
    const entries = await redis.xrange(logKey(), '-', '+');
    return entries.map(([, fields]) => parseEvent(fields)).map((e) => `${e.decision}${e.workflowId === undefined ? '' : ` ${e.workflowId}`}`);
  }

  /**
   * Two dispatches, by the activity's own count; the log's entries in the order `landed`; and what
   * `fire-once report` says: each duplicate's dispatches as [workflow ID, outcome], and exit 1 when
   * there is one.
   */
  async function expectReport(landed: readonly string[], duplicates: readonly (readonly string[])[][]): Promise<void> {
    expect(await readCount(redis, counterKey())).toBe(2);
    expect(await streamOrder()).toEqual(landed);
    const run = await cli('report', '--since', 'all', '--json');
    expect(run.stderr).toBe('');
    const report = JSON.parse(run.stdout) as { duplicates: { dispatches: { workflowId: string; outcome?: string }[] }[] };
    expect(report.duplicates.map((d) => d.dispatches.map((x) => [x.workflowId, x.outcome]))).toEqual(duplicates);
    expect(run.code).toBe(duplicates.length === 0 ? 0 : 1);
  }

  async function invalidateWithCli(): Promise<void> {
    const run = await cli('invalidate', scope, '--job-type', 'summary', '--force');
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
  }

  it('does not flag a dispatch before `invalidate` whose batch landed after it, with the fresh dispatch after it, as a duplicate', async () => {
    const a = worker('a');
    const b = worker('b');
    const release = a.hold();
    await a.run(); // dispatched and committed; its batch waits behind the hold
    const aFlushed = a.log.flush();
    await invalidateWithCli();
    await b.run(); // the fresh start the invalidation asked for
    await b.log.flush();
    await release(aFlushed);

    await expectReport(['invalidated', 'dispatched wf-b', 'committed wf-b', 'dispatched wf-a', 'committed wf-a'], []);
    // The CLI's entry carries Redis's clock of the invalidation, between the two acquires'.
    const [invalidated, dispatchedB, , dispatchedA] = (await redis.xrange(logKey(), '-', '+')).map(([, fields]) => parseEvent(fields));
    expect(dispatchedA.fencingToken).toBeLessThan(invalidated.redisTime!);
    expect(invalidated.redisTime).toBeLessThan(dispatchedB.fencingToken!);
  });

  it('flags two dispatches before `invalidate` as a duplicate when one batch landed after it', async () => {
    const a = worker('a');
    const b = worker('b');
    const release = a.hold();
    await a.run(true); // dispatched, failed and released; its batch waits behind the hold
    const aFlushed = a.log.flush();
    await b.run(); // dispatched again, and committed
    await b.log.flush();
    await invalidateWithCli();
    await release(aFlushed);

    await expectReport(
      ['dispatched wf-b', 'committed wf-b', 'invalidated', 'dispatched wf-a', 'released-on-failure wf-a'],
      [
        [
          ['wf-b', 'committed'],
          ['wf-a', 'released-on-failure'],
        ],
      ],
    );
  });

  it("places the plugin's own `invalidated` entry by its Redis clock when its batch lands after the next dispatch's", async () => {
    const a = worker('a');
    const b = worker('b');
    await a.run();
    await a.log.flush();
    const pluginClient = connection();
    const plugin = new FireOncePlugin({ redis: pluginClient, keyPrefix: prefix });
    expect(await plugin.invalidate(scope, 'summary', 'default')).toBe(true);
    // The entry is queued for the next batch, which goes out no sooner than a timer's turn: the
    // hold is sent before it.
    const release = hold(pluginClient);
    const pluginFlushed = plugin.dispatchLog!.flush();
    await b.run();
    await b.log.flush();
    await release(pluginFlushed);

    await expectReport(['dispatched wf-a', 'committed wf-a', 'dispatched wf-b', 'committed wf-b', 'invalidated'], []);
    const [, fields] = (await redis.xrevrange(logKey(), '+', '-', 'COUNT', 1))[0];
    expect(fields).toContain('redisTime');
  });

  it("reads an `invalidated` entry as 0.8.0 wrote it (no Redis clock) by its stream ID's time", async () => {
    const a = worker('a');
    const b = worker('b');
    const release = a.hold();
    await a.run();
    const aFlushed = a.log.flush();
    // 0.8.0's `invalidate`: delete, then append the entry, with no clock of the invalidation in it.
    // Its stream ID's millisecond is compared with the fencing tokens: wait for Redis's clock to
    // leave the millisecond of a's acquire, as any operator's invalidation does.
    const guard = new FireOnceGuard({ redis, keyPrefix: prefix });
    const clockMs = async () => {
      const [seconds, micros] = await redis.time();
      return Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000);
    };
    const started = await clockMs();
    while ((await clockMs()) <= started) await new Promise((resolve) => setImmediate(resolve));
    expect(await guard.invalidate(scope, 'summary')).toBe(true);
    await appendEvent(redis, guard.keys.log(), { decision: 'invalidated', namespace: 'default', scope, step: '', jobType: 'summary' });
    await b.run();
    await b.log.flush();
    await release(aFlushed);

    await expectReport(['invalidated', 'dispatched wf-b', 'committed wf-b', 'dispatched wf-a', 'committed wf-a'], []);
    const [, fields] = (await redis.xrange(logKey(), '-', '+', 'COUNT', 1))[0];
    expect(fields).not.toContain('redisTime');
  });
});
