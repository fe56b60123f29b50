export { startRedis, freePort, stopChild } from './redis';
export type { RedisService } from './redis';
export { startTemporal, findTemporalCli } from './temporal';
export type { TemporalService } from './temporal';
export { ServiceUnavailableError } from './errors';
