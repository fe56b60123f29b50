import { basename, join } from 'node:path';
import { DefaultLogger, bundleWorkflowCode, type WorkflowBundle } from '@temporalio/worker';
import { workflowInterceptorModules } from '../../src/core';
import type { ReleaseBuild } from '../support/release-build';

/** The compat workflows' source, which imports the workflow entry from `src/workflow`. */
export const COMPAT_WORKFLOWS = require.resolve('./fixtures/workflows');

const HEAD_WORKFLOW_ENTRY = join(__dirname, '..', '..', 'src', 'workflow');

/**
 * The compat workflows bundled as a worker of `release` runs them: with that release's workflow
 * interceptors, and its compiled `temporal-fire-once/workflow` in place of this checkout's
 * `src/workflow`. Without `release`: HEAD's, as the plugin bundles them.
 */
export async function bundleCompatWorkflows(release?: ReleaseBuild): Promise<WorkflowBundle> {
  const interceptors =
    release === undefined
      ? workflowInterceptorModules
      : ((await release.load('core')) as { workflowInterceptorModules: readonly string[] }).workflowInterceptorModules;
  if (release !== undefined && !interceptors.every((module) => module.startsWith(release.dir))) {
    throw new Error(`release ${release.version}'s workflow interceptors are not its own: ${interceptors.join(', ')}`);
  }
  const { code } = await bundleWorkflowCode({
    workflowsPath: COMPAT_WORKFLOWS,
    workflowInterceptorModules: [...interceptors],
    logger: new DefaultLogger('WARN'),
    webpackConfigHook: (config) => {
      if (release === undefined) return config;
      const alias = { ...(config.resolve?.alias as Record<string, string> | undefined), [HEAD_WORKFLOW_ENTRY]: release.entry('workflow') };
      return { ...config, resolve: { ...config.resolve, alias } };
    },
  });
  if (release !== undefined && (code.includes(join('src', 'workflow', 'scope')) || !code.includes(join(basename(release.dir), 'dist', 'workflow')))) {
    throw new Error(`the compat workflows bundled for release ${release.version} do not load its workflow entry alone`);
  }
  return { code };
}
