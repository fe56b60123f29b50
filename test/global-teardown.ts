import type { RedisService, TemporalService } from '../sample-workflows/services';

export default async function globalTeardown(): Promise<void> {
  const started = (globalThis as { __fireOnceServices?: { redis?: RedisService; temporal?: TemporalService } }).__fireOnceServices;
  await started?.temporal?.stop();
  await started?.redis?.stop();
}
