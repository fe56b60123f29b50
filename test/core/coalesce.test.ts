// The guard corks the connection's socket until the next tick, so the commands of one tick leave
// in one write (src/core/scripts.ts). On a redis-server of this file's own: the test reads its
// server-wide read counter.
import { Redis } from 'ioredis';
import { FireOnceGuard } from '../../src';
import { testPrefix } from '../support/redis';
import { spawnRedisServer, type SpawnedRedis } from '../support/redis-server';

describe('writes of one tick', () => {
  let server: SpawnedRedis;
  let redis: Redis;

  beforeAll(async () => {
    server = await spawnRedisServer();
    redis = new Redis(server.url);
    await redis.ping();
  });
  afterAll(async () => {
    await redis.quit();
    await server.stop();
  });

  const readsProcessed = async () => Number(/total_reads_processed:(\d+)/.exec(await redis.info('stats'))?.[1]);

  it('leave in one socket write: 64 acquires of one tick reach Redis in a read or two, and each decides alone', async () => {
    const guard = new FireOnceGuard({ redis, keyPrefix: testPrefix('coalesce') });
    await guard.acquire({ scope: 'warm', step: 'dispatch', jobType: 'job' }); // loads the script on this connection
    const before = await readsProcessed();

    const acquires = Array.from({ length: 64 }, (_, i) => guard.acquire({ scope: `s${i}`, step: 'dispatch', jobType: 'job' }));
    // Still in the tick that wrote them: every command sits in the corked socket, none is sent yet.
    expect(redis.stream.writableCorked).toBe(1);
    expect(redis.stream.writableLength).toBeGreaterThan(64 * 100);
    const outcomes = await Promise.all(acquires);
    expect(redis.stream.writableCorked).toBe(0);

    expect(outcomes.map((o) => o.kind)).toEqual(Array(64).fill('acquired'));
    const tokens = outcomes.map((o) => (o.kind === 'acquired' ? o.lease.fencingToken : 0));
    expect(new Set(tokens).size).toBe(64);
    // The INFO that reads the counter is one read itself; 64 writes of their own would be up to 64.
    expect((await readsProcessed()) - before - 1).toBeLessThanOrEqual(3);
  });

  it('leaves a client alone while it is not connected: the command queues and runs once it is', async () => {
    const lazy = new Redis(server.url, { lazyConnect: true });
    try {
      const guard = new FireOnceGuard({ redis: lazy, keyPrefix: testPrefix('coalesce') });
      const outcome = guard.acquire({ scope: 'offline', step: 'dispatch', jobType: 'job' }); // starts connecting
      expect(lazy.status).not.toBe('ready');
      expect((await outcome).kind).toBe('acquired');
      expect(lazy.stream.writableCorked).toBe(0);
    } finally {
      lazy.disconnect();
    }
  });
});
