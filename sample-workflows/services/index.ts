export { startRedis, freePort, stopChild } from './redis';
export type { RedisService } from './redis';
export { startTemporal, findTemporalCli } from './temporal';
export type { TemporalService } from './temporal';
export { startRedisCluster, clusterNodesFromEnv, formatClusterNodes, type ClusterNode, type RedisClusterService } from './cluster';
export { ServiceUnavailableError } from './errors';
export { requiredEnv, serveWorkerProcess, type ServedWorker } from './worker-process';
export { withRedisAndTemporal } from './local-stack';
