import { bundleWorkflowCode, DefaultLogger, Runtime, type WorkflowBundle } from '@temporalio/worker';
import { workflowInterceptorModules } from '../../src';

let installed = false;

/**
 * Keep the Temporal runtime to warnings and errors (or errors only), so that sample output stays
 * readable. The runtime can be installed once per process; later calls do nothing.
 */
export function quietTemporalLogs(level: 'WARN' | 'ERROR' = 'WARN'): void {
  if (installed) return;
  installed = true;
  try {
    Runtime.install({ logger: new DefaultLogger(level) });
  } catch {
    // Already installed by someone else in this process: keep theirs.
  }
}

/**
 * Bundle a sample's workflows once, with the fire-once workflow interceptor that carries the
 * dispatch scope. Every worker of the sample can then share the bundle, whatever its key prefix,
 * instead of paying for a webpack build per worker.
 */
export async function bundleSampleWorkflows(workflowsPath: string): Promise<WorkflowBundle> {
  const { code } = await bundleWorkflowCode({
    workflowsPath,
    workflowInterceptorModules: [...workflowInterceptorModules],
    logger: new DefaultLogger('WARN'),
  });
  return { code };
}
