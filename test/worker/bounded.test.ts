import { randomBytes } from 'node:crypto';
import { CompleteAsyncError } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger, type Worker } from '@temporalio/worker';
import { Redis } from 'ioredis';
import { FireOncePlugin, fireOnce } from '../../src';
import { deletePrefix, readCount, testPrefix } from '../support/redis';
import { waitFor } from '../support/wait';

// A worker that runs for weeks over millions of scopes: after 2,000 distinct scopes driven through
// every path of the plugin's interceptor (fresh fire, fast-forward from the local cache and from
// Redis, failure and release, invalidate, a wait that a commit ends and one that times out, park
// and hand-over, park and reap), in three namespaces of arbitrary names, nothing the plugin holds
// in this process or on Redis has an entry per scope; nor do restarts of its worker add up.
// Dispatches are counted by an INCR of the test's own; the structures are measured by size once
// the work is done. The Temporal client that parked waiters are handed over through records what it
// is asked: that is what is measured of it.

/** The plugin's parts that are measured. */
interface Internals {
  wake: { waiters: Map<string, unknown>; subscribed: Map<string, unknown>; healthListeners: unknown[]; subscriber?: Redis };
  parkedWatch: { size: number };
  namespaces: Set<string>;
}

const NAMESPACES = ['default', 'tenant.a-1', 'B_2'];
const SCOPES = 2_000;
const SLOW = 200; // scopes of the paths that wait
const LOCAL_CACHE = { maxEntries: 500, maxBytes: 1 << 20, maxAgeMs: 60_000 };

describe('a worker over many scopes', () => {
  let redis: Redis;
  let prefix: string;
  let name: string;
  /** Intervals set and not cleared (lease renewals, the parked watch's tick): unref'd, so no count of Node's shows them. */
  const intervals = new Set<unknown>();
  beforeEach(() => {
    prefix = testPrefix('bounded');
    name = `bounded-${randomBytes(4).toString('hex')}`;
    redis = new Redis(process.env.REDIS_URL!, { connectionName: name }); // duplicate() keeps the name
    const [set, clear] = [global.setInterval, global.clearInterval];
    jest.spyOn(global, 'setInterval').mockImplementation(((...args: Parameters<typeof setInterval>) => {
      const timer = set(...args);
      intervals.add(timer);
      return timer;
    }) as typeof setInterval);
    jest.spyOn(global, 'clearInterval').mockImplementation((timer) => {
      intervals.delete(timer);
      clear(timer);
    });
  });
  afterEach(async () => {
    jest.restoreAllMocks();
    await deletePrefix(redis, prefix);
    await redis.quit();
  });

  /** A plugin with workers in every namespace, and a way to run its activities there as a worker would. */
  function soakWorker() {
    const counter = `${prefix}:test:dispatches`;
    const gates = new Map<string, Promise<void>>(); // a holder's job runs until its scope's gate opens
    const activities = {
      job: fireOnce(
        async (scope: string, fail?: boolean) => {
          await redis.incr(counter);
          await gates.get(scope);
          if (fail) throw new Error(`job of ${scope} failed`);
          return `result of ${scope}`;
        },
        { scope: ([scope]: [string, boolean?]) => scope },
      ),
      parked: fireOnce(async (scope: string) => `parked ${scope}`, { scope: ([scope]: [string]) => scope, step: 'job', jobType: 'job', onInFlight: 'park' }),
    };
    const plugin = new FireOncePlugin({
      ...{ redis, keyPrefix: prefix, onInFlight: 'wait', pollIntervalMs: 20 },
      ...{ knownArtifacts: 500, localCache: LOCAL_CACHE, dispatchLogMaxLen: 200 },
    });
    const factories = new Map(NAMESPACES.map((ns) => [ns, plugin.configureWorker({ taskQueue: 'q', activities, namespace: ns }).interceptors!.activity!]));
    const handedOver: string[] = [];
    const client = {
      withAbortSignal: (_signal: AbortSignal, fn: () => unknown) => fn(),
      activity: {
        complete: async () => void handedOver.push('complete'),
        fail: async () => void handedOver.push('fail'),
        heartbeat: async () => undefined,
      },
    } as unknown as Client;
    const logger = new DefaultLogger('ERROR');
    let tokens = 0;
    const run = (ns: string, activity: 'job' | 'parked', args: [string, boolean?], info: object = {}) =>
      new MockActivityEnvironment(
        { namespace: ns, activityType: activity, taskToken: Buffer.from(`task-${tokens++}`), startToCloseTimeoutMs: 10_000, ...info },
        { client, interceptors: factories.get(ns), logger },
      ).run(activities[activity] as (...a: unknown[]) => Promise<unknown>, ...args);
    const dispatches = () => readCount(redis, counter);
    return { plugin, internals: plugin as unknown as Internals, gates, handedOver, run, dispatches };
  }

  /** `path` on `count` scopes named `tag<i>`, 50 at a time, spread over the namespaces. */
  async function each(count: number, tag: string, path: (scope: string, ns: string) => Promise<unknown>): Promise<void> {
    for (let start = 0; start < count; start += 50) {
      const batch = Array.from({ length: Math.min(50, count - start) }, (_, i) => start + i);
      await Promise.all(batch.map((i) => path(`${tag}${i}`, NAMESPACES[i % NAMESPACES.length])));
    }
  }

  const clients = async () => ((await redis.client('LIST')) as string).split('\n').filter((line) => line.includes(` name=${name} `)).length;
  const listeners = (emitter: Redis) => emitter.eventNames().map((event) => `${String(event)}:${emitter.listenerCount(event)}`);
  const subscriptions = async () => (await redis.pubsub('CHANNELS', `${prefix}:*`)).length;

  it('holds nothing per scope in the plugin, its cache, wake hub and parked watch, its log, or on Redis', async () => {
    const { plugin, internals, gates, handedOver, run, dispatches } = soakWorker();
    await redis.ping();
    const redisListeners = listeners(redis);
    const resources = process.getActiveResourcesInfo().length;
    let running: Record<string, unknown> = {};
    await plugin.runWorker({} as Worker, async () => {
      await each(SCOPES, 's', async (scope, ns) => {
        await run(ns, 'job', [scope]); // fresh fire
        await run(ns, 'job', [scope]); // fast-forward (local cache)
      });
      await each(SLOW, 's', async (scope, ns) => {
        await expect(run(ns, 'job', [`${scope}-fails`, true])).rejects.toThrow(/failed/); // released on failure
        await plugin.invalidate(scope, 'job', ns);
        await run(ns, 'job', [scope]); // fires again
      });
      await each(SLOW, 'w', async (scope, ns) => {
        let open!: () => void;
        gates.set(scope, new Promise<void>((resolve) => (open = resolve)));
        const holder = run(ns, 'job', [scope]);
        await waitFor('the holder runs', async () => (await redis.exists(plugin.guard.keysFor(ns).lock(scope, 'job'))) === 1);
        const timedOut = run(ns, 'job', [scope], { startToCloseTimeoutMs: 60 }).catch((err: Error) => err.name);
        const waiter = run(ns, 'job', [scope]); // waits in its slot until the commit
        const parked = run(ns, 'parked', [scope]).catch((err: unknown) => err instanceof CompleteAsyncError);
        expect([await timedOut, await parked]).toEqual(['ApplicationFailure', true]);
        open();
        await Promise.all([holder, waiter]); // the holder commits, hands the parked one over; the waiter fast-forwards
        gates.delete(scope);
      });
      await each(SLOW, 'r', async (scope, ns) => {
        // A holder that dies: its lock ends with no commit (deleted here, as its expiry would), and the reap fails the waiter parked on it.
        const lease = await plugin.guard.acquire({ scope, step: 'job', jobType: 'job', namespace: ns });
        expect(lease.kind).toBe('acquired');
        expect(await run(ns, 'parked', [scope]).catch((err: unknown) => err instanceof CompleteAsyncError)).toBe(true);
        await redis.del(plugin.guard.keysFor(ns).lock(scope, 'job'));
      });
      await waitFor('every parked waiter handed over', async () => handedOver.length === 2 * SLOW);
      await waitFor('no interval left: renewals stopped, the parked watch idle', async () => internals.parkedWatch.size === 0 && intervals.size === 0);
      await plugin.dispatchLog!.flush();
      const { wake } = internals;
      const log = plugin.dispatchLog as unknown as { pending: Map<string, unknown>; inFlight: Map<unknown, number> };
      running = {
        hub: [wake.waiters.size, wake.subscribed.size, wake.healthListeners.length],
        subscriber: listeners(wake.subscriber!),
        redis: listeners(redis),
        namespaces: internals.namespaces.size,
        cache: plugin.cache!.size <= LOCAL_CACHE.maxEntries,
        known: (plugin.guard as unknown as { known: Map<string, unknown> }).known.size <= 500,
        log: [log.pending.size, log.inFlight.size],
        subscriptions: await subscriptions(),
        clients: await clients(),
      };
    });
    expect(await dispatches()).toBe(SCOPES + 2 * SLOW + SLOW); // fires; failures and fires again; holders
    expect(handedOver.sort()).toEqual([...Array(SLOW).fill('complete'), ...Array(SLOW).fill('fail')]);
    expect(running).toEqual({
      hub: [3, 3, 1], // the cache's invalidation channels, one per namespace; its health listener
      subscriber: ['error:1', 'message:1', 'close:1', 'ready:1'],
      redis: redisListeners,
      namespaces: 3,
      cache: true,
      known: true,
      log: [0, 0],
      subscriptions: 3,
      clients: 2, // the caller's client and the plugin's subscriber
    });
    // Stopped: the subscriber is closed, with its subscriptions, and no timer or socket is left.
    await waitFor('the subscriber closed', async () => (await clients()) === 1);
    expect([await subscriptions(), intervals.size]).toEqual([0, 0]);
    await waitFor('no timer or socket left', async () => process.getActiveResourcesInfo().length <= resources);
    // On Redis, the only keys without a TTL are the namespaces' log streams, each capped near dispatchLogMaxLen.
    const untimed: string[] = [];
    for await (const keys of redis.scanStream({ match: `${prefix}:v3:*`, count: 1000 }) as AsyncIterable<string[]>) {
      for (const key of keys) if ((await redis.pttl(key)) === -1) untimed.push(key);
    }
    expect(untimed.sort()).toEqual(NAMESPACES.map((ns) => plugin.guard.keysFor(ns).log()).sort());
    for (const key of untimed) expect(await redis.xlen(key)).toBeLessThanOrEqual(200 + 100); // MAXLEN ~ trims whole nodes of 100
  });

  it('leaves no connection, subscription, listener or timer behind over 20 restarts of its workers', async () => {
    const { plugin, internals, gates, run, dispatches } = soakWorker();
    await redis.ping();
    const redisListeners = listeners(redis);
    const resources = process.getActiveResourcesInfo().length;
    const left: unknown[] = [];
    for (let restart = 0; restart < 20; restart++) {
      await plugin.runWorker({} as Worker, () =>
        each(30, `r${restart}-`, async (scope, ns) => {
          let open!: () => void;
          gates.set(scope, new Promise<void>((resolve) => (open = resolve)));
          const holder = run(ns, 'job', [scope]);
          await waitFor('the holder runs', async () => (await redis.exists(plugin.guard.keysFor(ns).lock(scope, 'job'))) === 1);
          const waiter = run(ns, 'job', [scope]);
          open();
          await Promise.all([holder, waiter]);
        }),
      );
      await waitFor('the subscriber closed', async () => (await clients()) === 1);
      left.push([await subscriptions(), intervals.size, internals.wake.healthListeners.length, listeners(redis)]);
    }
    expect(await dispatches()).toBe(20 * 30);
    expect(new Set(left.map((state) => JSON.stringify(state)))).toEqual(new Set([JSON.stringify([0, 0, 1, redisListeners])]));
    await waitFor('no timer or socket left', async () => process.getActiveResourcesInfo().length <= resources);
  });
});
