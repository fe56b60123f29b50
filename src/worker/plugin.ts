import { loadDataConverter } from '@temporalio/common/lib/internal-non-workflow';
import { SimplePlugin } from '@temporalio/plugin';
import type { WorkerOptions } from '@temporalio/worker';
import { FireOnceGuard } from '../core/guard';
import { createFireOnceActivityInterceptor } from './interceptor';
import { fireOnceActivityMap } from './fire-once';
import { resolvePluginOptions, type FireOncePluginOptions, type ResolvedPluginOptions } from './plugin-options';

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
 * here, at construction. The Redis client stays the caller's: the plugin never closes it.
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
    });
  }

  /** Adds the interceptors; guarded activities are found by name among `options.activities`. */
  override configureWorker(options: WorkerOptions): WorkerOptions {
    const configured = super.configureWorker(options);
    const activity = createFireOnceActivityInterceptor({
      guard: this.guard,
      activities: fireOnceActivityMap(configured.activities),
      onInFlight: this.fireOnceOptions.onInFlight,
      pollIntervalMs: this.fireOnceOptions.pollIntervalMs,
      payloadConverter: loadDataConverter(configured.dataConverter).payloadConverter,
    });
    const interceptors = configured.interceptors ?? {};
    return { ...configured, interceptors: { ...interceptors, activity: [...(interceptors.activity ?? []), activity] } };
  }
}
