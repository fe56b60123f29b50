import type { Redis } from 'ioredis';
import { acquireScript, commitScript, releaseScript } from '../../src/core/scripts';
import { connectRedis, deletePrefix, testPrefix } from '../helpers/redis';

// Each Lua script, called directly against a real Redis, against the contract in its header.
describe('Lua scripts', () => {
  let redis: Redis;
  let prefix: string;
  let artifact: string;
  let lock: string;

  beforeAll(() => {
    redis = connectRedis();
  });
  beforeEach(() => {
    prefix = testPrefix('scripts');
    artifact = `${prefix}:{s}:artifact:j`;
    lock = `${prefix}:{s}:lock:st`;
  });
  afterEach(() => deletePrefix(redis, prefix));
  afterAll(() => redis.quit());

  describe('acquire.lua', () => {
    it('returns {2} and sets the lock with its token and PX TTL when nothing exists', async () => {
      expect(await acquireScript(redis, [artifact, lock], ['tok-a', 60_000, 'result'])).toEqual([2]);
      expect(await redis.get(lock)).toBe('tok-a');
      const pttl = await redis.pttl(lock);
      expect(pttl).toBeGreaterThan(0);
      expect(pttl).toBeLessThanOrEqual(60_000);
    });

    it('returns {3, pttl} and leaves the lock alone when another token holds it', async () => {
      await redis.set(lock, 'tok-a', 'PX', 30_000);
      const [code, pttl] = (await acquireScript(redis, [artifact, lock], ['tok-b', 60_000, 'result'])) as [number, number];
      expect(code).toBe(3);
      expect(pttl).toBeGreaterThan(0);
      expect(pttl).toBeLessThanOrEqual(30_000);
      expect(await redis.get(lock)).toBe('tok-a');
    });

    it("'result' mode returns the artifact's exact bytes and does not touch the lock", async () => {
      const bytes = Buffer.from([0, 1, 2, 255, 10, 13]);
      await redis.set(artifact, bytes);
      const reply = (await acquireScript(redis, [artifact, lock], ['tok', 60_000, 'result'], true)) as [number, Buffer];
      expect(reply[0]).toBe(1);
      expect(Buffer.compare(reply[1], bytes)).toBe(0);
      expect(await redis.exists(lock)).toBe(0);
    });

    it("'exists' mode fast-forwards on any type of artifact key, returning ''", async () => {
      await redis.hset(artifact, 'field', 'v');
      expect(await acquireScript(redis, [artifact, lock], ['tok', 60_000, 'exists'])).toEqual([1, '']);
      expect(await redis.exists(lock)).toBe(0);
    });
  });

  describe('commit.lua', () => {
    it('writes the artifact with its TTL, keeps the lock, and returns 1 while the lock is ours', async () => {
      await redis.set(lock, 'tok', 'PX', 60_000);
      expect(await commitScript(redis, [artifact, lock], ['tok', Buffer.from('payload'), 5_000])).toBe(1);
      expect(await redis.get(artifact)).toBe('payload');
      const pttl = await redis.pttl(artifact);
      expect(pttl).toBeGreaterThan(0);
      expect(pttl).toBeLessThanOrEqual(5_000);
      expect(await redis.get(lock)).toBe('tok');
    });

    it('still writes the artifact but returns 0 when the lock expired or moved on', async () => {
      expect(await commitScript(redis, [artifact, lock], ['tok', Buffer.from('p'), 5_000])).toBe(0);
      await redis.set(lock, 'other', 'PX', 60_000);
      expect(await commitScript(redis, [artifact, lock], ['tok', Buffer.from('p2'), 5_000])).toBe(0);
      expect(await redis.get(artifact)).toBe('p2');
      expect(await redis.get(lock)).toBe('other');
    });
  });

  describe('release.lua', () => {
    it('deletes the lock only for its own token', async () => {
      await redis.set(lock, 'tok-a', 'PX', 60_000);
      expect(await releaseScript(redis, [lock], ['tok-b'])).toBe(0);
      expect(await redis.get(lock)).toBe('tok-a');
      expect(await releaseScript(redis, [lock], ['tok-a'])).toBe(1);
      expect(await redis.exists(lock)).toBe(0);
    });

    it('returns 0 for a missing lock', async () => {
      expect(await releaseScript(redis, [lock], ['tok'])).toBe(0);
    });
  });

  it('recovers after SCRIPT FLUSH (EVALSHA falls back to EVAL)', async () => {
    expect(await acquireScript(redis, [artifact, lock], ['tok', 60_000, 'result'])).toEqual([2]);
    await redis.script('FLUSH');
    expect(await releaseScript(redis, [lock], ['tok'])).toBe(1);
    expect(await acquireScript(redis, [artifact, lock], ['tok2', 60_000, 'result'])).toEqual([2]);
  });
});
