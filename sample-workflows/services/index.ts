export { startRedis, freePort, retryOnTakenPort, spawnRedisServerOnFreePort, stopChild, HOW_TO_GET_REDIS } from './redis';
export type { RedisService, RedisSource, SpawnedRedisServer, SpawnOptions, StartRedisOptions } from './redis';
export { FAST_DEV_SERVER, SECOND_NAMESPACE, startTemporal, findTemporalCli } from './temporal';
export type { TemporalService, StartTemporalOptions } from './temporal';
export { startRedisCluster, clusterNodesFromEnv, formatClusterNodes, type ClusterNode, type RedisClusterService } from './cluster';
export { ServiceUnavailableError } from './errors';
export { requiredEnv, serveWorkerProcess, startWorkerProcess, type ServedWorker } from './worker-process';
export { withRedisAndTemporal, type LocalStackOptions } from './local-stack';
