import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ActivityFailure, ApplicationFailure, WorkflowFailedError } from '@temporalio/client';
import { DefaultLogger, Worker, bundleWorkflowCode } from '@temporalio/worker';
import { FireOncePlugin } from '../../src';
import { guardedActivities } from './fixtures/activities';
import { newScope, oneResult, twoRunsThenOne, useFeatures, type FeatureContext } from '../support/features';

// A worker that loads a prebuilt bundle (workflowBundle: { codePath }) gets no workflow
// interceptors of its own: the SDK ignores the plugin's there. So the bundle must be built with
// the plugin (or workflowInterceptorModules) for setDispatchScope's scope to reach activities.
describe('Temporal features: a prebuilt workflow bundle', () => {
  const { harness, context } = useFeatures('bundle');
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'fire-once-bundle-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** Bundle the fixture workflows (with the plugin or not) into a file, and run `scenario` on a worker with the plugin that loads only that file. */
  async function withBundleWorker(bundledWithPlugin: boolean, scenario: (ctx: FeatureContext) => Promise<void>): Promise<void> {
    const { ctx, base } = context();
    const plugin = new FireOncePlugin({ redis: harness.redis, keyPrefix: ctx.prefix, pollIntervalMs: 50 });
    const { code } = await bundleWorkflowCode({
      workflowsPath: require.resolve('./fixtures/workflows'),
      plugins: bundledWithPlugin ? [plugin] : [],
      logger: new DefaultLogger('ERROR'),
    });
    const codePath = join(dir, `${ctx.taskQueue}.js`);
    writeFileSync(codePath, code);
    const worker = await Worker.create({
      connection: base.connection,
      taskQueue: ctx.taskQueue,
      workflowBundle: { codePath },
      activities: guardedActivities(harness.redis, ctx.prefix),
      plugins: [plugin],
    });
    await worker.runUntil(scenario(ctx));
  }

  it('built with the plugin: 2 concurrent runs and a later one share one dispatch', () =>
    withBundleWorker(true, async (ctx) => {
      const scope = newScope('bundle');
      oneResult(await twoRunsThenOne(ctx, 'dispatchRun', scope, 500), scope);
      expect(await ctx.count('dispatchJob', scope)).toBe(1);
    }));

  it('built without it: the scope never reaches the activity, which fails with FireOnceMissingScope and dispatches nothing', () =>
    withBundleWorker(false, async (ctx) => {
      const scope = newScope('bundle-bare');
      const error = await (await ctx.start('dispatchRun', [scope, 50])).result().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(WorkflowFailedError);
      const activity = (error as WorkflowFailedError).cause;
      expect(activity).toBeInstanceOf(ActivityFailure);
      expect(activity?.cause).toBeInstanceOf(ApplicationFailure);
      expect((activity?.cause as ApplicationFailure).type).toBe('FireOnceMissingScope');
      expect(await ctx.count('dispatchJob', scope)).toBe(0);
    }));

  it.each(['temporal-fire-once', 'temporal-fire-once/core'])(
    "workflow code that imports '%s', the worker side, fails the bundle naming the import and 'temporal-fire-once/workflow'",
    async (entry) => {
      // Beside the repository's node_modules, so that everything else the file imports resolves.
      const own = mkdtempSync(join(__dirname, 'fixtures', '.wrong-entry-'));
      try {
        const workflowsPath = join(own, 'workflows.ts');
        writeFileSync(
          workflowsPath,
          `import * as fireOnce from '${entry}';\nexport async function wrongEntry(): Promise<number> { return Object.keys(fireOnce).length; }\n`,
        );
        const logged: string[] = [];
        const logger = new DefaultLogger('ERROR', ({ message }) => void logged.push(message));
        const plugin = new FireOncePlugin({ redis: harness.redis });
        await expect(bundleWorkflowCode({ workflowsPath, plugins: [plugin], logger })).rejects.toThrow(/Webpack finished with errors/);
        expect(logged.join('\n')).toContain(
          `workflows.ts imports '${entry}', the worker side of temporal-fire-once, which needs Node and Redis: workflow code imports setDispatchScope and getDispatchScope from 'temporal-fire-once/workflow'`,
        );
      } finally {
        rmSync(own, { recursive: true, force: true });
      }
    },
  );
});
