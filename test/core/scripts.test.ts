import type { Redis } from 'ioredis';
import { acquireScript, commitScript, extendScript, invalidateScript, releaseScript } from '../../src/core/scripts';
import { connectRedis, deletePrefix, testPrefix } from '../helpers/redis';

// Each Lua script, called directly against a real Redis, against the contract in its header.
describe('Lua scripts', () => {
  let redis: Redis;
  let prefix: string;
  let artifact: string;
  let lock: string;
  let fence: string;
  let keys: string[];
  const FENCE_TTL = 120_000;

  beforeAll(() => {
    redis = connectRedis();
  });
  beforeEach(() => {
    prefix = testPrefix('scripts');
    artifact = `${prefix}:{s}:artifact:j`;
    lock = `${prefix}:{s}:lock:st`;
    fence = `${prefix}:{s}:fence:st`;
    keys = [artifact, lock, fence];
  });
  afterEach(() => deletePrefix(redis, prefix));
  afterAll(() => redis.quit());

  const acquire = (token: string, opts: { ttl?: number; mode?: 'result' | 'exists'; holder?: string; hash?: string } = {}) =>
    acquireScript(redis, keys, [token, opts.ttl ?? 60_000, opts.mode ?? 'result', opts.holder ?? `holder-${token}`, opts.hash ?? '', FENCE_TTL], true);

  describe('acquire.lua', () => {
    it('returns {2, fencing} and writes the lock hash with its PX TTL when nothing exists', async () => {
      expect(await acquire('tok-a', { hash: 'h1' })).toEqual([2, 1]);
      expect(await redis.hgetall(lock)).toEqual({ t: 'tok-a', o: 'holder-tok-a', h: 'h1', f: '1' });
      const pttl = await redis.pttl(lock);
      expect(pttl).toBeGreaterThan(0);
      expect(pttl).toBeLessThanOrEqual(60_000);
      expect(await redis.pttl(fence)).toBeGreaterThan(60_000);
    });

    it('increments the fencing token on every acquisition, never reusing one', async () => {
      expect(await acquire('a')).toEqual([2, 1]);
      await redis.del(lock);
      expect(await acquire('b')).toEqual([2, 2]);
      await redis.del(lock);
      expect(await acquire('c')).toEqual([2, 3]);
    });

    it('returns {3, pttl, holder, fencing} and leaves the lock alone when another token holds it', async () => {
      await acquire('tok-a', { ttl: 30_000, holder: 'wf-1' });
      const reply = await acquire('tok-b', { holder: 'wf-2' });
      expect(reply[0]).toBe(3);
      expect(reply[1]).toBeGreaterThan(0);
      expect(reply[1]).toBeLessThanOrEqual(30_000);
      expect(reply[2]?.toString()).toBe('wf-1');
      expect(reply[3]).toBe(1);
      expect(await redis.hget(lock, 't')).toBe('tok-a');
    });

    it("'result' mode returns the artifact's exact bytes and TTL and does not touch the lock", async () => {
      const bytes = Buffer.from([0, 1, 2, 255, 10, 13]);
      await redis.hset(artifact, 'p', bytes, 'h', '');
      await redis.pexpire(artifact, 50_000);
      const reply = (await acquire('tok')) as [number, Buffer, number];
      expect(reply[0]).toBe(1);
      expect(Buffer.compare(reply[1], bytes)).toBe(0);
      expect(reply[2]).toBeGreaterThan(0);
      expect(await redis.exists(lock)).toBe(0);
    });

    it("'exists' mode fast-forwards on any type of artifact key", async () => {
      await redis.xadd(artifact, '*', 'field', 'v');
      const reply = await acquire('tok', { mode: 'exists' });
      expect(reply.slice(0, 2).map(String)).toEqual(['1', '']);
      expect(await redis.exists(lock)).toBe(0);
    });

    it('returns {4, where, stored} on an args-hash conflict with the artifact or a stranger\'s lock, writing nothing', async () => {
      await redis.hset(artifact, 'p', 'x', 'h', 'h-old');
      expect((await acquire('t', { hash: 'h-new' })).map(String)).toEqual(['4', 'artifact', 'h-old']);
      expect(await acquire('t', { hash: 'h-old' })).toEqual([1, Buffer.from('x'), -1]);
      await redis.del(artifact);
      await acquire('a', { holder: 'wf-1', hash: 'h-1' });
      expect((await acquire('b', { holder: 'wf-2', hash: 'h-2' })).map(String)).toEqual(['4', 'lock', 'h-1']);
      // The same holder (a later attempt of the same call) is never a stranger.
      expect((await acquire('c', { holder: 'wf-1', hash: 'h-2' }))[0]).toBe(3);
      // No hash given: no check.
      expect((await acquire('d', { holder: 'wf-3' }))[0]).toBe(3);
      expect(await redis.get(fence)).toBe('1');
    });
  });

  describe('commit.lua', () => {
    it('writes the artifact hash with its TTL, keeps the lock, publishes, and returns 1 while the lock is ours', async () => {
      await acquire('tok');
      const sub = redis.duplicate();
      const got = new Promise<string>((resolve) => sub.on('message', (_channel, message) => resolve(message)));
      await sub.subscribe(`${prefix}:{s}:wake`);
      expect(await commitScript(redis, [artifact, lock], ['tok', Buffer.from('payload'), 5_000, 'h', `${prefix}:{s}:wake`])).toBe(1);
      expect(await got).toBe('commit');
      await sub.quit();
      expect(await redis.hgetall(artifact)).toEqual({ p: 'payload', h: 'h' });
      const pttl = await redis.pttl(artifact);
      expect(pttl).toBeGreaterThan(0);
      expect(pttl).toBeLessThanOrEqual(5_000);
      expect(await redis.hget(lock, 't')).toBe('tok');
    });

    it('marks the lock committed, so that once the artifact is gone the lock no longer blocks', async () => {
      await acquire('tok');
      expect(await commitScript(redis, [artifact, lock], ['tok', Buffer.from('p'), 60_000, '', ''])).toBe(1);
      expect(await redis.hget(lock, 'c')).toBe('1');
      expect((await acquire('late'))[0]).toBe(1); // artifact there: fast-forward
      await redis.del(artifact); // expired or invalidated
      expect(await acquire('next')).toEqual([2, 2]);
      expect(await redis.hget(lock, 't')).toBe('next');
      expect(await redis.hget(lock, 'c')).toBeNull();
    });

    it('still writes the artifact but returns 0 when the lock expired or moved on', async () => {
      expect(await commitScript(redis, [artifact, lock], ['tok', Buffer.from('p'), 5_000, '', ''])).toBe(0);
      await redis.hset(lock, 't', 'other');
      expect(await commitScript(redis, [artifact, lock], ['tok', Buffer.from('p2'), 5_000, '', ''])).toBe(0);
      expect(await redis.hget(artifact, 'p')).toBe('p2');
      expect(await redis.hget(lock, 't')).toBe('other');
    });
  });

  describe('release.lua', () => {
    it('deletes the lock only for its own token', async () => {
      await acquire('tok-a');
      expect(await releaseScript(redis, [lock], ['tok-b', ''])).toBe(0);
      expect(await redis.hget(lock, 't')).toBe('tok-a');
      expect(await releaseScript(redis, [lock], ['tok-a', ''])).toBe(1);
      expect(await redis.exists(lock)).toBe(0);
    });

    it('returns 0 for a missing lock', async () => {
      expect(await releaseScript(redis, [lock], ['tok', ''])).toBe(0);
    });
  });

  describe('invalidate.lua', () => {
    it('deletes the artifact and publishes its key, even when there was none', async () => {
      await redis.hset(artifact, 'p', 'x');
      const sub = redis.duplicate();
      const messages: string[] = [];
      sub.on('message', (_c, m) => messages.push(m));
      await sub.subscribe(`${prefix}:invalidations`);
      expect(await invalidateScript(redis, [artifact], [`${prefix}:invalidations`])).toBe(1);
      expect(await invalidateScript(redis, [artifact], [`${prefix}:invalidations`])).toBe(0);
      await redis.ping();
      await sub.quit();
      expect(messages).toEqual([artifact, artifact]);
      expect(await redis.exists(artifact)).toBe(0);
    });
  });

  describe('extend.lua', () => {
    it('sets a new TTL only for its own token', async () => {
      await acquire('tok', { ttl: 1_000 });
      expect(await extendScript(redis, [lock, fence], ['other', 90_000, FENCE_TTL])).toBe(0);
      expect(await redis.pttl(lock)).toBeLessThanOrEqual(1_000);
      expect(await extendScript(redis, [lock, fence], ['tok', 90_000, FENCE_TTL])).toBe(1);
      expect(await redis.pttl(lock)).toBeGreaterThan(1_000);
      await redis.del(lock);
      expect(await extendScript(redis, [lock, fence], ['tok', 90_000, FENCE_TTL])).toBe(0);
      expect(await redis.exists(lock)).toBe(0);
    });
  });

  it('recovers after SCRIPT FLUSH (EVALSHA falls back to EVAL)', async () => {
    expect((await acquire('tok'))[0]).toBe(2);
    await redis.script('FLUSH');
    expect(await releaseScript(redis, [lock], ['tok', ''])).toBe(1);
    expect((await acquire('tok2'))[0]).toBe(2);
  });
});
