// The TypeScript plugin's invalidate, for python/tests/test_plugin_invalidate.py to compare the
// `invalidated` entry it logs with the Python plugin's. Args: REDIS_URL PREFIX SCOPE JOB_TYPE NAMESPACE.
// Prints whether an artifact existed, once its dispatch-log entry is in the stream.
import { Redis } from 'ioredis';
import { FireOncePlugin } from '../../../src';

async function main(): Promise<void> {
  const [url, keyPrefix, scope, jobType, namespace] = process.argv.slice(2);
  const redis = new Redis(url);
  try {
    const plugin = new FireOncePlugin({ redis, keyPrefix });
    const existed = await plugin.invalidate(scope, jobType, namespace);
    await plugin.dispatchLog?.flush();
    if (plugin.dispatchLog?.dropped) throw new Error('the invalidated entry was dropped');
    process.stdout.write(`${existed}\n`);
  } finally {
    redis.disconnect();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
