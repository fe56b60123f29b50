import type { BundleOptions } from '@temporalio/worker';

type WebpackConfig = Parameters<NonNullable<BundleOptions['webpackConfigHook']>>[0];
type WebpackPlugin = NonNullable<WebpackConfig['plugins']>[number];
type Compiler = Parameters<Extract<WebpackPlugin, (...args: never[]) => unknown>>[0];

const NAME = 'temporal-fire-once';

/** The package's entries that need Node and Redis: workflow code may import neither. */
const WORKER_ENTRIES: readonly string[] = ['temporal-fire-once', 'temporal-fire-once/core'];

/**
 * Make the workflow bundle fail, naming the import and its fix, when workflow code imports the
 * worker side of the package. Webpack would fail anyway, on the Node modules it pulls in
 * (`node:async_hooks`, ioredis), with errors that name neither.
 */
export function refuseWorkerEntries(config: WebpackConfig): WebpackConfig {
  function apply(compiler: Compiler): void {
    compiler.hooks.normalModuleFactory.tap(NAME, (factory) => {
      factory.hooks.beforeResolve.tap(NAME, ({ request, contextInfo }) => {
        if (!WORKER_ENTRIES.includes(request)) return undefined;
        throw new Error(
          `${contextInfo.issuer || 'workflow code'} imports '${request}', the worker side of temporal-fire-once, which needs Node and Redis: ` +
            "workflow code imports setDispatchScope and getDispatchScope from 'temporal-fire-once/workflow', and compares a failure's type with its name as a string ('FireOnceInFlight')",
        );
      });
    });
  }
  return { ...config, plugins: [...(config.plugins ?? []), apply] };
}
