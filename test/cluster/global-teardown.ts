import type { RedisClusterService, TemporalService } from '../../sample-workflows/services';

export default async function globalTeardown(): Promise<void> {
  const started = (globalThis as { __fireOnceClusterServices?: { cluster?: RedisClusterService; temporal?: TemporalService } }).__fireOnceClusterServices;
  await started?.temporal?.stop();
  await started?.cluster?.stop();
}
