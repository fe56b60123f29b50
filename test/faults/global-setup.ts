import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { Redis } from 'ioredis';
import { FireOncePlugin } from '../../src';
import rootGlobalSetup from '../global-setup';
import { resetResults } from '../support/faults/report';

/**
 * The root global setup (one shared redis-server and Temporal dev server, in REDIS_URL and
 * TEMPORAL_ADDRESS), plus one workflow bundle of fixtures/workflows.ts built through the plugin,
 * so that the many worker processes the suites start and kill do not each bundle it again.
 */
export default async function globalSetup(): Promise<void> {
  await rootGlobalSetup();
  resetResults();
  const redis = new Redis({ lazyConnect: true });
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve('./fixtures/workflows'),
    plugins: [new FireOncePlugin({ redis })],
    logger: { log: () => undefined, trace: () => undefined, debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined },
  });
  redis.disconnect();
  const dir = mkdtempSync(join(tmpdir(), 'fire-once-faults-bundle-'));
  const path = join(dir, 'workflows-bundle.js');
  writeFileSync(path, code);
  process.env.FAULTS_WORKFLOW_BUNDLE = path;
}
