import { randomUUID } from 'node:crypto';
import type { Cluster } from 'ioredis';
import { WakeHub } from '../../src';
import { connectCluster, masters } from './helpers/cluster';

// WakeHub.onHealth promises `false` when the subscriber connection closes, since messages
// published until it is back are lost; the local artifact cache relies on it to empty itself and
// stop serving while invalidations cannot reach it. On a single Redis the duplicate() connection
// emits 'close'. On a Cluster, duplicate() is a Cluster whose subscriber connection is internal to
// ioredis: when it drops, ioredis silently picks a node again and re-subscribes, and the Cluster
// emits neither 'close' nor 'ready'. This test FAILS today: the hub never reports the gap.
describe('WakeHub on a Redis Cluster', () => {
  let cluster: Cluster;

  beforeAll(() => {
    cluster = connectCluster();
  });
  afterAll(() => cluster.quit());

  it('reports the loss of its subscriber connection through onHealth(false)', async () => {
    const hub = new WakeHub(cluster);
    const health: boolean[] = [];
    hub.onHealth((healthy) => health.push(healthy));
    const channel = `t-hub-health-${randomUUID()}`;
    let heard = 0;
    try {
      await hub.join(channel, () => void heard++);
      // Drop every pub/sub connection on every master: the hub's subscriber is among them.
      const killed = await Promise.all((await masters(cluster)).map((node) => node.call('CLIENT', 'KILL', 'TYPE', 'pubsub') as Promise<number>));
      expect(killed.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
      // Publish until the hub hears again (its subscription is back), so the gap is over.
      while (heard === 0) {
        await cluster.publish(channel, 'ping');
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(health).toContain(false);
    } finally {
      hub.close();
    }
  });
});
