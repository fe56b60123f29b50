import { defaultPayloadConverter } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { Redis } from 'ioredis';
import type { Worker, WorkerOptions } from '@temporalio/worker';
import { FireOnceGuard, FireOncePlugin, fireOnce } from '../../src';
import {
  ArtifactCache,
  ARTIFACT_CACHE_DEFAULTS,
  DispatchLog,
  WakeHub,
  createFireOnceActivityInterceptor,
  fireOnceActivityMap,
  parseEvent,
} from '../../src/core';
import { deletePrefix, testPrefix } from '../support/redis';
import { spawnRedisServer, type SpawnedRedis } from '../support/redis-server';
import { waitFor } from '../support/wait';

describe('local artifact cache', () => {
  // A redis-server of this file's own: the round-trip test counts the server's EVALSHA calls, which
  // other test files running at the same time would add to on the shared one.
  let server: SpawnedRedis;
  let redis: Redis;
  let prefix: string;
  let guard: FireOnceGuard;
  let hubs: WakeHub[];
  let runs: number;
  const activities = { job: fireOnce(async (s: string) => (runs++, `result ${s}`), { scope: ([s]) => s }) };

  beforeAll(async () => {
    server = await spawnRedisServer();
    redis = new Redis(server.url);
  });
  beforeEach(() => {
    prefix = testPrefix('cache');
    guard = new FireOnceGuard({ redis, keyPrefix: prefix });
    hubs = [];
    runs = 0;
  });
  afterEach(async () => {
    hubs.forEach((h) => h.close());
    await deletePrefix(redis, prefix);
  });
  afterAll(async () => {
    await redis.quit();
    await server.stop();
  });

  /** A worker's cache, subscribed to invalidations on its own connection. */
  async function workerCache(options: Partial<typeof ARTIFACT_CACHE_DEFAULTS> = {}): Promise<ArtifactCache> {
    const hub = new WakeHub(redis);
    hubs.push(hub);
    const cache = new ArtifactCache({ ...ARTIFACT_CACHE_DEFAULTS, ...options });
    await cache.attach(hub, [guard.keys.invalidations()]);
    return cache;
  }

  const run = (cache: ArtifactCache, scope = 's') => {
    const factory = createFireOnceActivityInterceptor({ guard, activities: fireOnceActivityMap(activities), cache });
    return new MockActivityEnvironment({ namespace: 'default', activityType: 'job' }, { interceptors: [factory] }).run(activities.job, scope);
  };
  /** Every command the server has run but the INFO calls that read the count: a plain GET counts too. */
  const commandCalls = async () => {
    const stats = await redis.info('commandstats');
    return [...stats.matchAll(/cmdstat_(\w+(?:\|\w+)?):calls=(\d+)/g)].filter((m) => m[1] !== 'info').reduce((n, m) => n + Number(m[2]), 0);
  };

  it('serves a hot repeat without any Redis round trip', async () => {
    const cache = await workerCache();
    await run(cache); // dispatch + commit: cached
    const before = await commandCalls();
    await run(cache);
    await run(cache);
    expect(await commandCalls()).toBe(before + 0);
    expect(runs).toBe(1);
    // The count sees a repeat without the cache: the guard's plain GET of an artifact it knows.
    const factory = createFireOnceActivityInterceptor({ guard, activities: fireOnceActivityMap(activities) });
    const uncached = await commandCalls();
    await new MockActivityEnvironment({ namespace: 'default', activityType: 'job' }, { interceptors: [factory] }).run(activities.job, 's');
    expect(await commandCalls()).toBeGreaterThan(uncached);
  });

  it('never serves an entry past the artifact TTL', async () => {
    const cache = await workerCache();
    const short = new FireOnceGuard({ redis, keyPrefix: prefix, artifactTtlMs: 150 });
    const factory = createFireOnceActivityInterceptor({ guard: short, activities: fireOnceActivityMap(activities), cache });
    const go = () => new MockActivityEnvironment({ namespace: 'default', activityType: 'job' }, { interceptors: [factory] }).run(activities.job, 's');
    await go();
    await new Promise((r) => setTimeout(r, 250));
    await go(); // artifact expired in Redis and in the cache: runs again
    expect(runs).toBe(2);
  });

  it('drops an invalidated artifact on every worker, so the next invocation dispatches again', async () => {
    const a = await workerCache();
    const b = await workerCache();
    await run(a);
    await run(b); // b caches it from Redis
    expect(a.size + b.size).toBe(2);
    expect(await guard.invalidate('s', 'job')).toBe(true);
    await waitFor('the invalidation to reach both workers', async () => a.size + b.size === 0);
    await run(b);
    expect(runs).toBe(2);
  });

  // Wired by hand, the cache follows the channels it was attached to; the interceptor files keys
  // under the activity's Temporal namespace. A worker of another namespace would never hear its
  // invalidations and would fast-forward a deleted artifact from the cache.
  it('caches nothing for a namespace whose invalidations it does not follow, so an invalidated step dispatches again', async () => {
    const cache = await workerCache(); // attached to the 'default' namespace's channel, as the @example shows
    const factory = createFireOnceActivityInterceptor({ guard, activities: fireOnceActivityMap(activities), cache });
    const go = () => new MockActivityEnvironment({ namespace: 'tenant-b', activityType: 'job' }, { interceptors: [factory] }).run(activities.job, 's');
    await go();
    expect(await guard.invalidate('s', 'job', 'tenant-b')).toBe(true);
    await go();
    expect(runs).toBe(2);
  });

  it('serves nothing while the invalidation subscription is down', async () => {
    const cache = await workerCache();
    await run(cache);
    expect(cache.get(guard.keys.artifact('s', 'job'), '')).toBeUndefined(); // other args hash
    hubs[0].close();
    await new Promise((r) => setTimeout(r, 50));
    expect(cache.size).toBe(0);
    await redis.del(guard.keys.artifact('s', 'job'), guard.keys.lock('s', 'job'));
    await run(cache);
    expect(runs).toBe(2);
  });

  // A restarted worker's hub opens a new subscriber; the old one's close event can come later.
  it('is not switched off by the late close of the subscriber a restarted worker replaced', async () => {
    const hub = new WakeHub(redis);
    hubs.push(hub);
    const health: boolean[] = [];
    hub.onHealth((healthy) => health.push(healthy));
    await hub.join(guard.keys.invalidations(), () => undefined);
    hub.close(); // the worker stops: serve nothing from now on, at once
    expect(health.at(-1)).toBe(false);
    await hub.join(guard.keys.invalidations(), () => undefined); // and starts again
    await new Promise((r) => setTimeout(r, 100)); // the old connection's events have all arrived
    expect(health.at(-1)).toBe(true);
  });

  it("caches nothing from a late holder whose commit was refused: every worker serves the newer holder's result", async () => {
    const cache = await workerCache();
    let openGate!: () => void;
    const gate = new Promise<void>((resolve) => (openGate = resolve));
    let calls = 0;
    const numbered = {
      job: fireOnce(
        async (_scope: string) => {
          const n = ++calls;
          if (n === 1) await gate; // the first holder is still running when its lock is taken
          return `result ${n}`;
        },
        { scope: ([s]) => s },
      ),
    };
    const log = new DispatchLog(redis, guard.keys, 1_000);
    const factory = createFireOnceActivityInterceptor({ guard, activities: fireOnceActivityMap(numbered), cache, dispatchLog: log });
    // A fast-forward returns the stored payload (a RawValue); the converter turns either back into the value.
    const value = (result: unknown) => defaultPayloadConverter.fromPayload(defaultPayloadConverter.toPayload(result));
    const go = async () =>
      value(await new MockActivityEnvironment({ namespace: 'default', activityType: 'job' }, { interceptors: [factory] }).run(numbered.job, 's'));
    const first = go();
    while (calls === 0) await new Promise((r) => setTimeout(r, 10));
    await redis.del(guard.keys.lock('s', 'job')); // what `fire-once release --force` does
    expect(await go()).toBe('result 2'); // the newer holder dispatches and commits
    openGate();
    expect(await first).toBe('result 1'); // the late holder gets its own result; its commit is refused
    expect(await go()).toBe('result 2');
    expect(value(await run(await workerCache()))).toBe('result 2'); // another worker reads Redis
    expect(calls).toBe(2);
    await log.flush();
    const decisions = (await redis.xrange(guard.keys.log(), '-', '+')).map(([, fields]) => parseEvent(fields).decision);
    expect(decisions.filter((d) => d === 'committed' || d === 'commit-refused')).toEqual(['committed', 'commit-refused']);
  });

  it("subscribes to the invalidations of a namespace whose worker starts while another of the plugin's runs", async () => {
    const plugin = new FireOncePlugin({ redis, keyPrefix: prefix, localCache: true });
    const subscribers = async (namespace: string) => Number(((await redis.pubsub('NUMSUB', guard.keysFor(namespace).invalidations())) as [string, number])[1]);
    const workerOf = (namespace: string) => plugin.configureWorker({ namespace, taskQueue: 'q', activities: {} } as WorkerOptions);
    workerOf('default');
    let stopFirst: () => void = () => undefined;
    const first = plugin.runWorker({} as Worker, () => new Promise<void>((resolve) => (stopFirst = resolve)));
    for (const deadline = Date.now() + 5_000; (await subscribers('default')) === 0 && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 10));
    workerOf('tenant-b');
    // The second worker takes tasks only once its namespace's invalidations reach the cache.
    let seen = 0;
    await plugin.runWorker({} as Worker, async () => void (seen = await subscribers('tenant-b')));
    stopFirst();
    await first;
    expect(seen).toBe(1);
  });

  it('keeps nothing read before an invalidation that arrived while the read was in flight', async () => {
    const cache = await workerCache();
    const key = guard.keys.artifact('s', 'job');
    const mark = cache.mark(); // taken before the Redis call whose reply would be kept
    await guard.invalidate('s', 'job'); // meanwhile the artifact is deleted, and the caches are told
    await waitFor('the invalidation to reach the cache', async () => cache.mark() !== mark, { timeoutMs: 5_000, everyMs: 5 });
    cache.set(key, Buffer.from('the deleted copy'), '', 60_000, mark);
    expect(cache.get(key, '')).toBeUndefined();
    cache.set(key, Buffer.from('a copy read after it'), '', 60_000, cache.mark());
    expect(cache.get(key, '')?.toString()).toBe('a copy read after it');
  });

  /**
   * A guard whose `method` (acquire or commit) gets its reply from Redis, and then, before the
   * interceptor sees it, has the artifact invalidated and the notice delivered to `cache`: the
   * race that the cache's mark is for, made to happen every time.
   */
  function invalidatedInFlight(cache: ArtifactCache, method: 'acquire' | 'commit'): FireOnceGuard {
    const raced = new FireOnceGuard({ redis, keyPrefix: prefix });
    const real = raced[method].bind(raced) as (...args: unknown[]) => Promise<unknown>;
    (raced as unknown as Record<string, unknown>)[method] = async (...args: unknown[]) => {
      const reply = await real(...args);
      const mark = cache.mark();
      expect(await guard.invalidate('s', 'job')).toBe(true);
      await waitFor('the invalidation to reach the cache', async () => cache.mark() !== mark, { timeoutMs: 5_000, everyMs: 5 });
      return reply;
    };
    return raced;
  }
  const runWith = (cache: ArtifactCache, through: FireOnceGuard) => {
    const factory = createFireOnceActivityInterceptor({ guard: through, activities: fireOnceActivityMap(activities), cache });
    return new MockActivityEnvironment({ namespace: 'default', activityType: 'job' }, { interceptors: [factory] }).run(activities.job, 's');
  };

  it('keeps no fast-forward whose artifact was invalidated while the acquire was in flight, so the next call dispatches', async () => {
    await run(await workerCache()); // another worker dispatches and commits
    const cache = await workerCache();
    expect(await runWith(cache, invalidatedInFlight(cache, 'acquire'))).toBeDefined(); // fast-forwarded from the reply
    expect(runs).toBe(1);
    expect(cache.size).toBe(0);
    await run(cache);
    expect(runs).toBe(2);
  });

  it('keeps no result whose artifact was invalidated while the commit was in flight, so the next call dispatches', async () => {
    const cache = await workerCache();
    await runWith(cache, invalidatedInFlight(cache, 'commit'));
    expect(runs).toBe(1);
    expect(cache.size).toBe(0);
    await run(cache);
    expect(runs).toBe(2);
  });

  it("keeps a fast-forward no longer than the artifact's TTL left in Redis, not the worker's own artifactTtlMs", async () => {
    const short = new FireOnceGuard({ redis, keyPrefix: prefix, artifactTtlMs: 3_000 }); // room for a loaded machine to fast-forward first
    const committer = createFireOnceActivityInterceptor({ guard: short, activities: fireOnceActivityMap(activities) });
    await new MockActivityEnvironment({ namespace: 'default', activityType: 'job' }, { interceptors: [committer] }).run(activities.job, 's');
    const cache = await workerCache();
    await run(cache); // fast-forwards the short-lived artifact, and caches it (this guard's artifactTtlMs is 7 days)
    expect([runs, cache.size]).toEqual([1, 1]);
    await waitFor('the artifact to expire in Redis', async () => (await redis.exists(guard.keys.artifact('s', 'job'))) === 0, {
      timeoutMs: 10_000,
      everyMs: 20,
    });
    await run(cache);
    expect(runs).toBe(2);
  });

  it('stays within its byte bound', async () => {
    const cache = await workerCache({ maxBytes: 200 });
    for (let i = 0; i < 10; i++) await run(cache, `scope-${i}`);
    expect(cache.size).toBeLessThan(10);
    expect(cache.size).toBeGreaterThan(0);
  });
});
