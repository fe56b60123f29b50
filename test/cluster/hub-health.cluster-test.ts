import { randomUUID } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { FireOnceConfigError, FireOncePlugin } from '../../src';
import { WakeHub } from '../../src/core';
import { connectCluster, masters } from '../support/cluster/cluster';

// WakeHub.onHealth reports `false` when its subscriber connection closes on a single Redis, and
// the local artifact cache relies on that to empty itself while invalidations cannot reach it. On
// a Cluster, ioredis re-subscribes its internal subscriber silently, emitting neither 'close' nor
// 'ready', so the gap cannot be seen. The plugin therefore refuses localCache with a Cluster
// client; waiters are unaffected, since their poll covers any wake-up lost in such a gap.
describe('WakeHub and the local cache on a Redis Cluster', () => {
  let cluster: Cluster;

  beforeAll(() => {
    cluster = connectCluster();
  });
  afterAll(() => cluster.quit());

  it('refuses localCache with a Cluster client, naming why', () => {
    expect(() => new FireOncePlugin({ redis: cluster, localCache: true })).toThrow(FireOnceConfigError);
    expect(() => new FireOncePlugin({ redis: cluster, localCache: true })).toThrow(/Redis Cluster/);
    expect(() => new FireOncePlugin({ redis: cluster })).not.toThrow();
  });

  it('keeps delivering wake-ups after its subscriber connection is killed (ioredis re-subscribes)', async () => {
    // Only this hub's subscriber is killed, found by its connection's name: the other files'
    // workers share the cluster, and a wake test there counts every waiter rung.
    const name = `hub-health-${randomUUID().slice(0, 8)}`;
    const named = connectCluster({ redisOptions: { connectionName: name } });
    const hub = new WakeHub(named);
    const channel = `t-hub-health-${randomUUID()}`;
    let heard = 0;
    try {
      await hub.join(channel, () => void heard++);
      const killed = await Promise.all((await masters(cluster)).map((node) => killNamed(node, name)));
      expect(killed.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
      for (let i = 0; i < 200 && heard === 0; i++) {
        await cluster.publish(channel, 'ping');
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(heard).toBeGreaterThan(0);
    } finally {
      hub.close();
      named.disconnect();
    }
  });
});

/** Kill the pub/sub connections named `name` on `node`; how many there were. */
async function killNamed(node: Redis, name: string): Promise<number> {
  const list = (await node.call('CLIENT', 'LIST', 'TYPE', 'pubsub')) as string;
  const ids = list
    .split('\n')
    .filter((line) => line.includes(name)) // ioredis adds a prefix: name=ioredis-cluster(subscriber):<name>
    .map((line) => /^id=(\d+) /.exec(line)?.[1]);
  for (const id of ids) if (id) await node.call('CLIENT', 'KILL', 'ID', id);
  return ids.length;
}
