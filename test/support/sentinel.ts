import { spawnRedisServerOnFreePort } from '../../sample-workflows/services';

/** One Redis Sentinel this test spawned, monitoring one master. */
export interface SpawnedSentinel {
  /** `redis://127.0.0.1:<port>`: the sentinel's own address, not the master's. */
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
}

/**
 * Spawn one sentinel (`redis-server <conf> --sentinel`, which is all `redis-sentinel` is) that
 * monitors `master` as master group `name`, and wait until it names its ID; one whose port was
 * taken starts again on another (spawnRedisServerOnFreePort). For tests that give a
 * sentinel's address where a data node's belongs; test/support/cluster/sentinel.ts has a whole
 * group for failovers.
 */
export async function spawnSentinel(master: { readonly host: string; readonly port: number }, name = 'orders'): Promise<SpawnedSentinel> {
  const sentinel = await spawnRedisServerOnFreePort([], { sentinel: [`sentinel monitor ${name} ${master.host} ${master.port} 1`] });
  return { url: sentinel.url, port: sentinel.port, stop: sentinel.stop };
}
