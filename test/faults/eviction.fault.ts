import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { FireOnceKeys } from '../../src/core';
import { spawnRedisServer, type SpawnedRedis } from '../support/redis-server';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';
import { faultKeys } from './fixtures/activities';
import { recordResult } from '../support/faults/report';
import { FaultClient } from '../support/faults/temporal';
import { FAULT_PACE, waitFor } from '../support/wait';
import { startFaultWorker, stopAll, type FaultWorker, type FaultWorkerEnv } from '../support/faults/workers';

// Eviction. The guard's Redis is a redis-server of this suite's own with a small maxmemory and
// maxmemory-policy volatile-lru (the default of several managed services): every key the guard
// writes has a TTL, so this policy may evict them. Worker processes refuse to start on it; with
// allowEvictingRedis they start, and memory pressure (filler keys, written by the test) evicts a
// live lock, after which a second invocation dispatches the same job again. The jobs count their
// dispatches on the suite's shared Redis, which evicts nothing.
const STEP = 'gatedJob';

describe("a Redis that evicts the guard's keys", () => {
  const prefix = testPrefix('eviction');
  const keys = new FireOnceKeys(prefix);
  let server: SpawnedRedis;
  let admin: Redis;
  let counters: Redis;
  let client: FaultClient;
  const workers: FaultWorker[] = [];
  const env = (): FaultWorkerEnv => ({
    TEMPORAL_ADDRESS: process.env.TEMPORAL_ADDRESS as string,
    REDIS_URL: server.url,
    COUNTER_REDIS_URL: process.env.REDIS_URL as string,
    TASK_QUEUE: `faults-eviction-${randomUUID()}`,
    KEY_PREFIX: prefix,
  });

  beforeAll(async () => {
    server = await spawnRedisServer(['--maxmemory', '16mb', '--maxmemory-policy', 'volatile-lru']);
    admin = new Redis(server.url);
    counters = connectRedis();
    client = await FaultClient.connect(process.env.TEMPORAL_ADDRESS as string);
  });
  afterAll(async () => {
    await stopAll(workers);
    await client?.close();
    admin?.disconnect();
    await server?.stop();
    await deletePrefix(counters, prefix);
    await counters.quit();
  });

  it('a worker process refuses to start: Worker.run rejects with FireOnceConfigError saying to set maxmemory-policy noeviction', async () => {
    const worker = await startFaultWorker(env()); // READY is printed before Worker.run, which checks Redis
    workers.push(worker);
    await waitFor('the worker to exit', async () => worker.exited, FAULT_PACE);
    expect(worker.child.exitCode).toBe(1);
    expect(worker.stderr()).toMatch(/FireOnceConfigError: Redis at 127\.0\.0\.1:\d+ has maxmemory-policy volatile-lru: .*Set `maxmemory-policy noeviction`/);
  });

  it('with allowEvictingRedis: each worker warns once; memory pressure evicts a live lock, and the same job is dispatched twice', async () => {
    const started = Date.now();
    const workerEnv = { ...env(), ALLOW_EVICTING_REDIS: '1' as const };
    workers.push(...(await Promise.all([startFaultWorker(workerEnv), startFaultWorker(workerEnv)])));
    const pair = workers.slice(-2);
    const scope = `eviction-${randomUUID()}`;
    const dispatches = async () => Number(await counters.get(faultKeys.dispatches(prefix, scope)));
    const first = await client.start(workerEnv.TASK_QUEUE, 'gatedRun', [scope, scope]);
    await waitFor('the first run to dispatch', async () => (await dispatches()) === 1, FAULT_PACE);
    const lockKey = keys.lock(scope, STEP);
    expect(await admin.exists(lockKey)).toBe(1);

    // Memory pressure: filler keys with a TTL (evictable under volatile-lru, as the lock is),
    // written until Redis has evicted the lock. The lock was last touched before every filler.
    const filler = Buffer.alloc(64 * 1024, 'x');
    let written = 0;
    while ((await admin.exists(lockKey)) === 1) {
      if (written >= 5_000) throw new Error(`the lock survived ${written} filler keys of 64 KiB`);
      const batch = admin.pipeline();
      for (let i = 0; i < 25; i++) batch.set(`filler:${written++}`, filler, 'EX', 3600);
      await batch.exec();
    }
    const evictedKeys = Number(/evicted_keys:(\d+)/.exec(await admin.info('stats'))?.[1]);
    expect(evictedKeys).toBeGreaterThan(0);

    // The job is still running (its gate is shut) and its lock is gone: a new invocation of the
    // same scope finds neither lock nor artifact and dispatches again.
    const second = await client.start(workerEnv.TASK_QUEUE, 'gatedRun', [scope, scope]);
    await waitFor('the second run to dispatch the same job again', async () => (await dispatches()) === 2, FAULT_PACE);
    await counters.set(faultKeys.gate(prefix, scope), '1');
    const results = await client.results([first, second]);
    const seen = await dispatches();
    recordResult({
      suite: 'Redis evicts a live lock (volatile-lru, allowEvictingRedis; duplicate expected)',
      runs: `${results.length} runs of one scope`,
      dispatchesExpected: 2,
      dispatchesSeen: seen,
      ms: Date.now() - started,
    });
    process.stdout.write(
      `eviction: ${written} filler keys of 64 KiB under maxmemory 16mb evicted ${evictedKeys} keys, the live lock among them; the job was dispatched ${seen} times\n`,
    );
    expect(seen).toBe(2);
    expect(new Set(results.map((r) => r.nonce)).size).toBe(2);

    for (const worker of pair) {
      const warnings = worker.logs().filter((l) => l.level === 'WARN' && l.message.includes('allowEvictingRedis'));
      expect(warnings.map((w) => w.message)).toEqual([
        expect.stringMatching(/^fire-once: Redis at 127\.0\.0\.1:\d+ has maxmemory-policy volatile-lru: .*starting anyway because allowEvictingRedis is true$/),
      ]);
    }
  });
});
