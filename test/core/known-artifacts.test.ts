// knownArtifacts: a repeat of an artifact this guard has seen is read with a plain GET. On a
// redis-server of this file's own; the commands are counted as the client sends them.
import { Redis } from 'ioredis';
import { FireOnceConfigError, FireOnceCorruptArtifact, FireOnceGuard, FireOnceKeyConflict, type FireOnceGuardOptions } from '../../src';
import { testPrefix } from '../support/redis';
import { spawnRedisServer, type SpawnedRedis } from '../support/redis-server';

describe('knownArtifacts', () => {
  let server: SpawnedRedis;
  let redis: Redis;
  let prefix: string;

  beforeAll(async () => {
    server = await spawnRedisServer();
    redis = new Redis(server.url);
  });
  beforeEach(() => {
    prefix = testPrefix('known');
  });
  afterAll(async () => {
    await redis.quit();
    await server.stop();
  });

  const guardWith = (options: Partial<FireOnceGuardOptions> = {}) => new FireOnceGuard({ redis, keyPrefix: prefix, ...options });
  const target = (scope: string, argsHash?: string) => ({ scope, step: 'dispatch', jobType: 'report', ...(argsHash ? { argsHash } : {}) });

  /** Run `fn` and count the GETs and scripts the client sent meanwhile (a script's own GETs are not sent). */
  async function counted<T>(fn: () => Promise<T>): Promise<{ value: T; get: number; evalsha: number }> {
    const spy = jest.spyOn(redis, 'sendCommand'); // observes only: every command still goes to Redis
    try {
      const value = await fn();
      const names = spy.mock.calls.map(([command]) => command.name);
      return { value, get: names.filter((n) => n === 'get').length, evalsha: names.filter((n) => n === 'evalsha' || n === 'eval').length };
    } finally {
      spy.mockRestore();
    }
  }

  async function fire(guard: FireOnceGuard, scope: string, result: string, argsHash?: string): Promise<void> {
    const outcome = await guard.acquire(target(scope, argsHash));
    if (outcome.kind !== 'acquired') throw new Error(`expected acquired, got ${outcome.kind}`);
    await guard.commit(outcome.lease, Buffer.from(result));
  }

  it('reads a step this guard committed with one plain GET and no script, and returns the stored bytes', async () => {
    const guard = guardWith();
    await fire(guard, 's1', 'result 1');
    const { value, get, evalsha } = await counted(() => guard.acquire(target('s1')));
    expect(value).toMatchObject({ kind: 'fast-forward', artifact: Buffer.from('result 1') });
    expect({ get, evalsha }).toEqual({ get: 1, evalsha: 0 });
  });

  it("takes the script for another guard's artifact the first time, then a GET", async () => {
    await fire(guardWith(), 's2', 'result 2');
    const other = guardWith(); // another process: it has seen nothing yet
    const first = await counted(() => other.acquire(target('s2')));
    expect(first.value.kind).toBe('fast-forward');
    expect({ get: first.get, evalsha: first.evalsha }).toEqual({ get: 0, evalsha: 1 });
    const second = await counted(() => other.acquire(target('s2')));
    expect(second.value).toMatchObject({ kind: 'fast-forward', artifact: Buffer.from('result 2') });
    expect({ get: second.get, evalsha: second.evalsha }).toEqual({ get: 1, evalsha: 0 });
  });

  it('lets the script decide once the artifact is gone: the step is acquired again, and the key forgotten', async () => {
    const guard = guardWith();
    await fire(guard, 's3', 'result 3');
    await guardWith().invalidate('s3', 'report'); // another process invalidates it
    const again = await counted(() => guard.acquire(target('s3')));
    expect(again.value.kind).toBe('acquired');
    expect({ get: again.get, evalsha: again.evalsha }).toEqual({ get: 1, evalsha: 1 });
    if (again.value.kind === 'acquired') await guard.release(again.value.lease);
    const next = await counted(() => guard.acquire(target('s3')));
    expect({ get: next.get, evalsha: next.evalsha }).toEqual({ get: 0, evalsha: 1 });
  });

  it('reports an artifact overwritten with another type as corrupt, through the script, not as Redis down', async () => {
    const guard = guardWith();
    await fire(guard, 's4', 'result 4');
    const key = guard.keys.artifact('s4', 'report');
    await redis.del(key);
    await redis.hset(key, 'field', 'value');
    await expect(guard.acquire(target('s4'))).rejects.toBeInstanceOf(FireOnceCorruptArtifact);
  });

  it('still refuses other arguments on the GET path (FireOnceKeyConflict)', async () => {
    const guard = guardWith();
    await fire(guard, 's5', 'result 5', 'hash-a');
    await expect(guard.acquire(target('s5', 'hash-b'))).rejects.toBeInstanceOf(FireOnceKeyConflict);
    expect((await guard.acquire(target('s5', 'hash-a'))).kind).toBe('fast-forward');
  });

  it('forgets the least recent keys past its bound, and is off at 0', async () => {
    const bounded = guardWith({ knownArtifacts: 2 });
    for (const scope of ['b1', 'b2', 'b3']) await fire(bounded, scope, scope);
    expect((await counted(() => bounded.acquire(target('b1')))).evalsha).toBe(1);
    expect((await counted(() => bounded.acquire(target('b3')))).evalsha).toBe(0);
    const off = guardWith({ knownArtifacts: 0 });
    await fire(off, 'o1', 'o1');
    expect(await counted(() => off.acquire(target('o1')))).toMatchObject({ get: 0, evalsha: 1 });
  });

  it.each([
    [-1, 'knownArtifacts must be 0 (off) or a positive integer (got -1)'],
    [1.5, 'knownArtifacts must be 0 (off) or a positive integer (got 1.5)'],
    ['10', 'knownArtifacts must be 0 (off) or a positive integer (got "10")'],
    [2_000_000, 'knownArtifacts must be at most 1000000 keys (got 2000000)'],
  ])('refuses knownArtifacts %p with FireOnceConfigError', (value, message) => {
    expect(() => guardWith({ knownArtifacts: value as number })).toThrow(new FireOnceConfigError(message));
  });
});
