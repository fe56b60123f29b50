import { loadDataConverter } from '@temporalio/common/lib/internal-non-workflow';
import { SimplePlugin } from '@temporalio/plugin';
import type { Worker, WorkerOptions } from '@temporalio/worker';
import { ArtifactCache } from '../core/artifact-cache';
import { DispatchLog } from '../core/dispatch-log';
import { FireOnceConfigError } from '../core/errors';
import { FireOnceGuard } from '../core/guard';
import { isCluster } from '../core/scripts';
import { WakeHub } from '../core/wake';
import { createFireOnceActivityInterceptor } from './interceptor';
import { fireOnceActivityMap } from './fire-once';
import { resolvePluginOptions, ttlWarnings, type FireOncePluginOptions, type ResolvedPluginOptions } from './plugin-options';
import { checkWorkerRedis } from './redis-check';

/**
 * Paths of the workflow interceptor modules that carry the dispatch scope from
 * `setDispatchScope()` to activities, for workers and bundles wired by hand.
 *
 * @example
 * ```ts
 * import { workflowInterceptorModules } from 'temporal-fire-once';
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
 * through `process.emitWarning` (code `FIRE_ONCE_TTL`). When a worker starts, Redis is checked:
 * a `maxmemory-policy` that can evict the guard's keys fails the start (see `allowEvictingRedis`
 * and docs/production-redis.md). The Redis client stays the caller's: the
 * plugin never closes it; it only opens one subscriber connection of its own (a `duplicate()`)
 * for pub/sub wake-ups, and closes that when the worker stops.
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
  private cacheAttached: Promise<void> | undefined;
  private redisChecked: Promise<void> | undefined;
  private runningWorkers = 0;

  constructor(options: FireOncePluginOptions) {
    const resolved = resolvePluginOptions(options);
    super({ name: 'temporal-fire-once', workerInterceptors: { workflowModules: [...workflowInterceptorModules] } });
    this.fireOnceOptions = resolved;
    this.guard = new FireOnceGuard({
      redis: resolved.redis,
      keyPrefix: resolved.keyPrefix,
      lockTtlMs: resolved.lockTtlMs,
      artifactTtlMs: resolved.artifactTtlMs,
      storeTimeoutMs: resolved.storeTimeoutMs,
      publishWakeUps: resolved.publishWakeUps,
    });
    this.wake = new WakeHub(resolved.redis);
    if (resolved.localCache && isCluster(resolved.redis)) {
      // ioredis re-subscribes a Cluster's subscriber silently, so a gap in which invalidations
      // are lost cannot be seen, and a cache that cannot see it could serve a deleted artifact.
      throw new FireOnceConfigError('localCache is not supported with a Redis Cluster client: the cache could not tell when invalidations were lost');
    }
    this.cache = resolved.localCache ? new ArtifactCache(resolved.localCache) : undefined;
    this.dispatchLog = resolved.dispatchLog ? new DispatchLog(resolved.redis, this.guard.keys.log(), resolved.dispatchLogMaxLen) : undefined;
    for (const warning of ttlWarnings(resolved)) process.emitWarning(warning, { code: 'FIRE_ONCE_TTL' });
  }

  /** Adds the interceptors; guarded activities are found by name among `options.activities`. */
  override configureWorker(options: WorkerOptions): WorkerOptions {
    const configured = super.configureWorker(options);
    const { payloadConverter, payloadCodecs } = loadDataConverter(configured.dataConverter);
    const o = this.fireOnceOptions;
    const activity = createFireOnceActivityInterceptor({
      guard: this.guard,
      activities: fireOnceActivityMap(configured.activities),
      onInFlight: o.onInFlight,
      pollIntervalMs: o.pollIntervalMs,
      lockMode: o.lockMode,
      leaseMs: o.leaseMs,
      maxArtifactBytes: o.maxArtifactBytes,
      payloadConverter,
      payloadCodecs,
      ...(o.publishWakeUps ? { wake: this.wake } : {}),
      ...(this.dispatchLog ? { dispatchLog: this.dispatchLog } : {}),
      ...(this.cache ? { cache: this.cache } : {}),
    });
    const interceptors = configured.interceptors ?? {};
    return { ...configured, interceptors: { ...interceptors, activity: [...(interceptors.activity ?? []), activity] } };
  }

  /** Runs the worker, then closes the plugin's own subscriber connection once no worker runs. */
  override async runWorker(worker: Worker, next: (w: Worker) => Promise<void>): Promise<void> {
    this.runningWorkers++;
    try {
      await this.checkRedis();
      await this.attachCache();
      await super.runWorker(worker, next);
    } finally {
      if (--this.runningWorkers === 0) {
        this.wake.close();
        this.cacheAttached = undefined;
      }
    }
  }

  /**
   * Delete the stored result of `(scope, jobType)` so the next invocation dispatches again. Every
   * worker's local cache drops it too. Resolves whether an artifact existed.
   */
  async invalidate(scope: string, jobType: string): Promise<boolean> {
    this.cache?.delete(this.guard.keys.artifact(scope, jobType));
    return this.guard.invalidate(scope, jobType);
  }

  /**
   * Refuse a Redis that can evict the guard's keys, once per plugin, before the first worker
   * takes a task (see `allowEvictingRedis`). A refusal is not remembered: the next run checks again.
   */
  checkRedis(): Promise<void> {
    this.redisChecked ??= checkWorkerRedis(this.fireOnceOptions).catch((err: unknown) => {
      this.redisChecked = undefined;
      throw err;
    });
    return this.redisChecked;
  }

  /** Subscribe the local cache to invalidations before the worker takes tasks. */
  attachCache(): Promise<void> {
    if (this.cache === undefined) return Promise.resolve();
    this.cacheAttached ??= this.cache.attach(this.wake, this.guard.keys.invalidations());
    return this.cacheAttached;
  }
}
