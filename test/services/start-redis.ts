/**
 * Run by find-redis.test.ts in a child process with a PATH and environment of its choosing:
 * `startRedis()` as the tests and benches call it, or with `--embedded` as the demo does, or
 * with `--global-setup` the suite's own global setup. Prints `RESULT <json>` after a PING through
 * the Redis it got and stopping it, or `UNAVAILABLE <message>` and exits 2.
 */
import { Redis } from 'ioredis';
import { ServiceUnavailableError, startRedis } from '../../sample-workflows/services';
import globalSetup from '../global-setup';

async function main(): Promise<void> {
  if (process.argv.includes('--global-setup')) {
    await globalSetup(); // fails at Redis, before it would start Temporal
    console.log('RESULT {"globalSetup":"passed"}');
    return;
  }
  const service = await startRedis({ embeddedFallback: process.argv.includes('--embedded'), progress: (line) => console.log(line) });
  const client = new Redis(service.url, { maxRetriesPerRequest: 1 });
  try {
    const pong = await client.ping();
    console.log(`RESULT ${JSON.stringify({ url: service.url, source: service.source, spawned: service.spawned, description: service.description, pong })}`);
  } finally {
    client.disconnect();
    await service.stop();
  }
}

main().catch((err: unknown) => {
  if (err instanceof ServiceUnavailableError) {
    console.log(`UNAVAILABLE ${err.message}`);
    process.exit(2);
  }
  console.error(err);
  process.exit(1);
});
