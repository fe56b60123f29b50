import { SimplePlugin } from '@temporalio/plugin';
import { Runtime, type BundleOptions, type Worker, type WorkerOptions } from '@temporalio/worker';
import { ArtifactCache } from '../core/artifact-cache';
import { DispatchLog, redisTimeMicros } from '../core/dispatch-log';
import { FireOnceConfigError } from '../core/errors';
import { FireOnceGuard } from '../core/guard';
import { DEFAULT_NAMESPACE } from '../core/keys';
import { ParkingLot } from '../core/parking';
import { claimProtocol } from '../core/protocol';
import { isCluster } from '../core/scripts';
import { WakeHub } from '../core/wake';
import { refuseWorkerEntries } from './bundle-check';
import { loadWorkerConverter } from './converter';
import { fireOnceActivityMap } from './fire-once';
import { createFireOnceActivityInterceptor, isFireOnceInterceptor, useRunningWorker } from './interceptor';
import { ParkedWatch } from './parked-watch';
import { guardOptionsOf, resolvePluginOptions, ttlWarnings, type FireOncePluginOptions, type ResolvedPluginOptions } from './options';
import { checkPluginRedis } from './redis-check';
import { WorkerStopping } from './worker-stopping';

/** How long a stopping worker gives Temporal to take the failures of the waiters it parked. */
const PARKED_CLOSE_MS = 10_000;

/**
 * Paths of the workflow interceptor modules that carry the dispatch scope from
 * `setDispatchScope()` to activities, for workers and bundles wired by hand.
 *
 * @example
 * ```ts
 * import { workflowInterceptorModules } from 'temporal-fire-once/core';
 * // bundleWorkflowCode({ workflowsPath, workflowInterceptorModules: [...workflowInterceptorModules] })
 * console.log(workflowInterceptorModules.length); // 1
 * ```
 */
export const workflowInterceptorModules: readonly string[] = Object.freeze([require.resolve('../workflow/interceptors')]);

/**
 * The Temporal worker and bundler plugin. It adds the workflow interceptor that propagates the
 * dispatch scope and the activity interceptor that guards every activity marked with
 * `fireOnce()` or `@FireOnce()`; all other activities run exactly as before. Options are checked
 * here, at construction, and TTLs that would let artifacts expire too early are warned about
 * through `process.emitWarning` (code `FIRE_ONCE_TTL`). When a worker starts, the plugin refuses a
 * Redis that can evict the guard's keys (see `allowEvictingRedis` and docs/production-redis.md),
 * and claims the key prefix for its protocol version, refusing a prefix another version writes.
 * Each activity's keys are filed under its Temporal namespace. The Redis client stays the
 * caller's: the plugin never closes it; it only opens one subscriber connection of its own (a
 * `duplicate()`) for pub/sub wake-ups, and closes that when the worker stops.
 *
 * @example
 * ```ts
 * import { Worker, bundleWorkflowCode } from '@temporalio/worker';
 * import { FireOncePlugin, fireOnce } from 'temporal-fire-once';
 * import { Redis } from 'ioredis';
 *
 * export async function runWorker(workflowsPath: string): Promise<void> {
 *   const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
 *   const plugin = new FireOncePlugin({ redis, lockTtlMs: 10 * 60_000 });
 *   const activities = { dispatchSummary: fireOnce(async (sessionId: string) => `job for ${sessionId}`) };
 *   // Either let the worker bundle workflowsPath, or prebuild a bundle with the same plugin:
 *   const workflowBundle = await bundleWorkflowCode({ workflowsPath, plugins: [plugin] });
 *   const worker = await Worker.create({ taskQueue: 'chat', activities, workflowBundle, plugins: [plugin] });
 *   await worker.run();
 *   redis.disconnect();
 * }
 * ```
 */
export class FireOncePlugin extends SimplePlugin {
  /** The resolved options, defaults filled in. */
  readonly fireOnceOptions: ResolvedPluginOptions;
  /** The core guard this plugin uses; usable directly, e.g. to inspect keys. */
  readonly guard: FireOnceGuard;
  /** The dispatch log, unless switched off. */
  readonly dispatchLog: DispatchLog | undefined;
  /** The in-worker artifact cache, when `localCache` is on. */
  readonly cache: ArtifactCache | undefined;
  private readonly wake: WakeHub;
  private readonly parkedWatch: ParkedWatch;
  private readonly stopping = new WorkerStopping();
  /** The namespaces whose keys this plugin's workers use, for the cache's invalidation channels. */
  private readonly namespaces = new Set<string>();
  private started: Promise<void> | undefined;
  private redisChecked: Promise<void> | undefined;
  private runningWorkers = 0;

  constructor(options: FireOncePluginOptions) {
    const resolved = resolvePluginOptions(options);
    super({ name: 'temporal-fire-once', workerInterceptors: { workflowModules: [...workflowInterceptorModules] } });
    this.fireOnceOptions = resolved;
    this.guard = new FireOnceGuard({ ...guardOptionsOf(options), redis: resolved.redis, namespace: resolved.keyNamespace ?? DEFAULT_NAMESPACE });
    this.wake = new WakeHub(resolved.redis);
    this.parkedWatch = new ParkedWatch(new ParkingLot(this.guard), resolved.pollIntervalMs);
    if (resolved.localCache && isCluster(resolved.redis)) {
      // ioredis re-subscribes a Cluster's subscriber silently, so a gap in which invalidations
      // are lost cannot be seen, and a cache that cannot see it could serve a deleted artifact.
      throw new FireOnceConfigError('localCache is not supported with a Redis Cluster client: the cache could not tell when invalidations were lost');
    }
    this.cache = resolved.localCache ? new ArtifactCache(resolved.localCache) : undefined;
    this.dispatchLog = resolved.dispatchLog ? new DispatchLog(resolved.redis, this.guard.keys, resolved.dispatchLogMaxLen) : undefined;
    for (const warning of ttlWarnings(resolved)) process.emitWarning(warning, { code: 'FIRE_ONCE_TTL' });
  }

  /** Adds the workflow interceptor module, and refuses workflow code that imports the worker side. */
  override configureBundler(options: BundleOptions): BundleOptions {
    const configured = super.configureBundler(options);
    const hook = configured.webpackConfigHook;
    return { ...configured, webpackConfigHook: (config) => refuseWorkerEntries(hook ? hook(config) : config) };
  }

  /** Adds the interceptors; guarded activities are found by name among `options.activities`. */
  override configureWorker(options: WorkerOptions): WorkerOptions {
    const configured = super.configureWorker(options);
    if ((configured.interceptors?.activity ?? []).some(isFireOnceInterceptor)) {
      // Caught here, not at the first guarded call: each call would fail its workflow instead.
      throw new FireOnceConfigError(
        'this worker already has a fire-once activity interceptor (FireOncePlugin given twice, or beside one made by createFireOnceActivityInterceptor): give it one',
      );
    }
    this.namespaces.add(this.fireOnceOptions.keyNamespace ?? configured.namespace ?? DEFAULT_NAMESPACE);
    const o = this.fireOnceOptions;
    const activity = this.stopping.interceptor((workerStopping) =>
      createFireOnceActivityInterceptor({
        guard: this.guard,
        activities: fireOnceActivityMap(configured.activities),
        onInFlight: o.onInFlight,
        pollIntervalMs: o.pollIntervalMs,
        lockMode: o.lockMode,
        leaseMs: o.leaseMs,
        maxArtifactBytes: o.maxArtifactBytes,
        keyNamespace: o.keyNamespace,
        ...loadWorkerConverter(configured.dataConverter),
        ...(o.publishWakeUps ? { wake: this.wake } : {}),
        ...(this.dispatchLog ? { dispatchLog: this.dispatchLog } : {}),
        ...(this.cache ? { cache: this.cache } : {}),
        parkedWatch: this.parkedWatch,
        workerStopping,
      }),
    );
    const interceptors = configured.interceptors ?? {};
    return { ...configured, interceptors: { ...interceptors, activity: [...(interceptors.activity ?? []), activity] } };
  }

  /**
   * Claims the key prefix and subscribes the local cache to the invalidations of every namespace
   * its workers file keys under, before the worker takes tasks; runs the worker, telling its
   * activity interceptor when it begins to shut down ({@link WorkerStopping}); then fails the
   * waiters this worker parked so that they retry on a worker that runs ({@link ParkedWatch.close}),
   * through its own client, before its connection may be closed (the plugin's other workers, if
   * any, go on watching theirs); and once no worker runs, sends the last dispatch-log batch and
   * closes the plugin's subscriber connection.
   */
  override async runWorker(worker: Worker, next: (w: Worker) => Promise<void>): Promise<void> {
    this.runningWorkers++;
    try {
      // The activities and converter the worker runs with, a later plugin's included (configureWorker saw only the earlier ones').
      const options = (worker as Partial<Worker>).options;
      if (options?.loadedDataConverter !== undefined) {
        const activities = options.activities instanceof Map ? fireOnceActivityMap(Object.fromEntries(options.activities)) : undefined;
        useRunningWorker(options.interceptors?.activity ?? [], { activities, converter: options.loadedDataConverter });
      }
      await this.start();
      // A worker of a namespace the plugin had not seen when the first worker started: its
      // invalidations too, before it takes a task (the channels already subscribed are kept).
      await this.cache?.attach(this.wake, this.invalidationChannels());
      const unwatch = this.stopping.watch(worker);
      try {
        await super.runWorker(worker, next);
      } finally {
        unwatch();
      }
    } finally {
      if (--this.runningWorkers === 0) {
        await this.closeParked(undefined);
        await this.flushLog();
        this.wake.close();
        this.started = undefined;
      } else if (worker.client !== undefined) {
        // Workers sharing this plugin may have connections of their own, and this one's may be
        // closed once its run() resolves: its waiters are failed now, through its own client.
        await this.closeParked(worker.client);
      }
    }
  }

  /**
   * Delete the stored result of `(scope, jobType)` so the next invocation dispatches again. Every
   * worker's local cache drops it too, and the dispatch log records `invalidated`. `namespace` is
   * the Temporal namespace whose result it is; when absent, the plugin's `keyNamespace`, else the
   * one namespace its workers run in. A plugin with neither (no worker yet, or workers in several
   * namespaces) refuses with `FireOnceConfigError` rather than guess. Resolves whether an
   * artifact existed.
   */
  async invalidate(scope: string, jobType: string, namespace?: string): Promise<boolean> {
    const ns = namespace ?? this.fireOnceOptions.keyNamespace ?? this.onlyNamespace();
    const artifactKey = this.guard.keysFor(ns).artifact(scope, jobType);
    this.cache?.delete(artifactKey);
    // Redis's clock, read by a TIME sent just ahead of the delete, orders the entry against the
    // dispatches' fencing tokens however late its batch lands (docs/operating.md, report). One that
    // cannot be read leaves the field out: `fire-once report` then goes by the entry's stream ID.
    const clock = this.dispatchLog ? redisTimeMicros(this.guard.redis, artifactKey).catch(() => undefined) : undefined;
    const existed = await this.guard.invalidate(scope, jobType, ns);
    this.dispatchLog?.record({ decision: 'invalidated', namespace: ns, scope, step: '', jobType, redisTime: await clock });
    return existed;
  }

  /** The namespace of this plugin's workers, when they all run in one. */
  private onlyNamespace(): string {
    if (this.namespaces.size === 1) return [...this.namespaces][0];
    const workers = this.namespaces.size === 0 ? 'has no worker yet' : `has workers in ${[...this.namespaces].map((ns) => JSON.stringify(ns)).join(' and ')}`;
    throw new FireOnceConfigError(
      `invalidate: say whose result: keys are filed under each activity's namespace (keyNamespace is unset) and this plugin ${workers}; pass the namespace, e.g. plugin.invalidate(scope, jobType, 'default')`,
    );
  }

  /**
   * Fail the waiters a stopping worker parked through `client` (without it, every waiter still
   * watched: the last worker stops), so that they retry at once. That calls
   * Temporal: it gets at most {@link PARKED_CLOSE_MS}, so that a Temporal gone or stalled at
   * shutdown cannot keep the worker from stopping. The waiters whose failure it had not answered
   * by then end at their heartbeat or start-to-close timeout, and are counted at WARN.
   */
  private async closeParked(client: Worker['client']): Promise<void> {
    const unanswered = await this.parkedWatch.close(PARKED_CLOSE_MS, client);
    if (unanswered > 0) {
      Runtime.instance().logger.warn(
        `fire-once: ${unanswered} parked waiters' failures had no answer from Temporal within ${PARKED_CLOSE_MS} ms as ${client === undefined ? 'the last' : 'a'} worker stopped: they end at their heartbeat or start-to-close timeout`,
        { unanswered },
      );
    }
  }

  /**
   * Send the dispatch log's last batch, waiting at most `storeTimeoutMs` for Redis: a client that
   * queues commands until Redis comes back (`maxRetriesPerRequest: null`) must not keep a stopping
   * worker from stopping. What is left unanswered is logged at WARN.
   */
  private async flushLog(): Promise<void> {
    const timeoutMs = this.guard.options.storeTimeoutMs;
    const unanswered = (await this.dispatchLog?.flush(timeoutMs)) ?? 0;
    if (unanswered > 0) {
      Runtime.instance().logger.warn(
        `fire-once: ${unanswered} dispatch-log entries had no answer from Redis within storeTimeoutMs (${timeoutMs} ms) as the last worker stopped: they may be lost`,
        { unanswered },
      );
    }
  }

  /** The invalidation channels of every namespace this plugin's workers file keys under. */
  private invalidationChannels(): string[] {
    return [...this.namespaces].map((namespace) => this.guard.keysFor(namespace).invalidations());
  }

  /**
   * Refuse a Redis that can evict the guard's keys (once per plugin; a refusal is checked again
   * next time), then claim the key prefix for this protocol (once per run).
   */
  private start(): Promise<void> {
    this.started ??= (async () => {
      this.redisChecked ??= checkPluginRedis(this.fireOnceOptions).catch((err: unknown) => {
        this.redisChecked = undefined;
        throw err;
      });
      await this.redisChecked;
      await claimProtocol(this.guard.redis, this.guard.keys);
    })().catch((err: unknown) => {
      this.started = undefined;
      throw err;
    });
    return this.started;
  }
}
