import type { Redis } from 'ioredis';
import { FireOnceGuard } from '../../src';
import { readLock } from '../../src/cli/inspect';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';
import { runCli } from './run-cli';

// `fire-once inspect` with neither --step nor --job-type finds everything under the scope's hash
// tag. A key there that the guard does not write (the chat-session sample's external artifact,
// `<scopeBase>:result:summary`) decides what the next invocation does, so inspect lists it rather
// than report the scope empty.
jest.setTimeout(120_000);

describe('fire-once inspect and keys of the scope that the guard does not write', () => {
  let redis: Redis;
  const prefix = testPrefix('cli-inspect-other');
  beforeAll(() => {
    redis = connectRedis();
  });
  afterAll(async () => {
    await deletePrefix(redis, prefix);
    await redis.quit();
  });

  it("lists an external artifact under the scope's hash tag, with its type and TTL, and does not call the scope empty", async () => {
    const guard = new FireOnceGuard({ redis, keyPrefix: prefix });
    const external = `${guard.keys.scopeBase('session-9')}:result:summary`;
    await redis.set(external, 'the summary job was sent', 'EX', 3600);
    // The guard reads it as the scope's artifact: the next invocation is fast-forwarded, nothing runs.
    const outcome = await guard.acquire({ scope: 'session-9', step: 'dispatch-summary', jobType: 'summary', externalArtifactKey: external });
    expect(outcome.kind).toBe('fast-forward');

    const human = await runCli(['inspect', 'session-9', '--prefix', prefix, '--redis', process.env.REDIS_URL!]);
    expect(human.code).toBe(0);
    expect(human.stdout).not.toContain('nothing stored');
    expect(human.stdout).toContain(`other key under this scope: ${external}`);

    const run = await runCli(['inspect', 'session-9', '--prefix', prefix, '--redis', process.env.REDIS_URL!, '--json']);
    const view = JSON.parse(run.stdout) as { otherKeys?: { key: string; type: string; ttlMs: number }[] };
    expect(view.otherKeys).toEqual([{ key: external, type: 'string', ttlMs: expect.any(Number) }]);
    expect(view.otherKeys?.[0].ttlMs).toBeLessThanOrEqual(3_600_000);
  });

  it('reads a lock that expires between its TYPE and its GET as absent, not as foreign data to delete by hand', async () => {
    const guard = new FireOnceGuard({ redis, keyPrefix: prefix });
    const outcome = await guard.acquire({ scope: 'session-10', step: 'report', jobType: 'report' });
    if (outcome.kind !== 'acquired') throw new Error(`expected acquired, got ${outcome.kind}`);
    // The lock runs out just after TYPE said "string": the GET finds nothing.
    const expiring = new Proxy(redis, {
      get(target, name) {
        if (name === 'get') return async (key: string) => (await target.del(key), target.get(key));
        const value = Reflect.get(target, name) as unknown;
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const { view, value } = await readLock(expiring, guard.keys, 'session-10', 'report');
    expect({ present: view.present, foreign: view.foreign, value }).toEqual({ present: false, foreign: undefined, value: undefined });
  });
});
