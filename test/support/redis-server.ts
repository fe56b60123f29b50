import { spawnSync } from 'node:child_process';
import { spawnRedisServerOnFreePort, type SpawnedRedisServer, type SpawnOptions } from '../../sample-workflows/services';

/** A redis-server this test spawned itself, on a free loopback port. */
export type SpawnedRedis = SpawnedRedisServer;

const HOW_TO_GET_REDIS = 'Install redis-server (Debian/Ubuntu: `apt-get install -y redis-server`; macOS: `brew install redis`).';

/**
 * Spawn `redis-server` with `args` on a free port (no persistence) and wait until it says it is
 * ready. With `tls`, the port is a TLS port and plain TCP is off; `args` must then carry the
 * certificate options. With `clusterBus`, it runs in cluster mode on a bus port of its own.
 * Tests use this, not the suite's shared Redis, whenever they change server state (passwords,
 * ACL users, replicas, maxmemory, TLS) so that no other test can see it.
 */
export async function spawnRedisServer(args: readonly string[] = [], options: Pick<SpawnOptions, 'tls' | 'clusterBus'> = {}): Promise<SpawnedRedis> {
  if (spawnSync('redis-server', ['--version']).error) {
    throw new Error(`redis-server is not on PATH; these tests start their own servers. ${HOW_TO_GET_REDIS}`);
  }
  return spawnRedisServerOnFreePort(args, options);
}
