import type { Redis } from 'ioredis';
import { FireOnceKeys } from '../../src/core';
import { PAGE_SIZE, findLatest, idAfter, idBefore } from '../../src/cli/log';
import { forceReleaseScript, release } from '../../src/cli/release';
import { CliError, EXIT } from '../../src/cli/exit-codes';
import { useGuardFixture } from '../support/redis';
import { lockToken, writeLock } from '../support/records';

// The CLI's own Lua scripts, called directly against a real Redis, against their headers.
describe('the CLI scripts', () => {
  const fx = useGuardFixture('cli-scripts');
  const target = { scope: 's', step: 'st', jobType: 'j' };

  // The log is paged with plain IDs next to the last one read, not Redis 6.2's `(` prefix, so the
  // CLI reads it on the 5.0 the library supports. Checked here against Redis's own order.
  it('pages the log with the IDs just after and just before an entry, as an exclusive range would', async () => {
    const { redis, prefix } = fx;
    const log = `${prefix}:ids`;
    const max = (2n ** 64n - 1n).toString();
    for (const id of ['5-0', '5-1', `5-${max}`, '6-0']) await redis.xadd(log, id, 'f', id);
    const ids = (entries: [string, string[]][]) => entries.map(([id]) => id);
    expect(ids(await redis.xrange(log, idAfter('5-0'), '+'))).toEqual(['5-1', `5-${max}`, '6-0']);
    expect(ids(await redis.xrange(log, idAfter(`5-${max}`), '+'))).toEqual(['6-0']);
    expect(ids(await redis.xrevrange(log, idBefore('6-0')!, '-'))).toEqual([`5-${max}`, '5-1', '5-0']);
    expect(ids(await redis.xrevrange(log, idBefore('5-1')!, '-'))).toEqual(['5-0']);
    expect(idBefore('0-0')).toBeUndefined();
  });

  describe('force-release.lua', () => {
    const wakeUps = async (redis: Redis, channel: string, run: () => Promise<unknown>) => {
      const subscriber = redis.duplicate();
      const messages: string[] = [];
      subscriber.on('message', (_c: string, m: string) => messages.push(m));
      await subscriber.subscribe(channel);
      try {
        const result = await run();
        await subscriber.ping(); // a publish before the PING's reply has been delivered
        return { result, messages };
      } finally {
        subscriber.disconnect();
      }
    };

    it('deletes the lock it read and wakes the waiters; refuses once another holder has it', async () => {
      const { redis, guard } = fx;
      const keys = guard.keys;
      const first = await guard.acquire(target);
      if (first.kind !== 'acquired') throw new Error('expected acquired');
      const channel = keys.wakeChannel(target.scope);
      // Read as the CLI reads it, then the lock passes to another holder before the script runs.
      const read = (await redis.get(first.lease.lockKey))!;
      await redis.del(first.lease.lockKey);
      const second = await guard.acquire(target);
      if (second.kind !== 'acquired') throw new Error('expected acquired');
      const refused = await wakeUps(redis, channel, () => forceReleaseScript(redis, [first.lease.lockKey], [read, channel]));
      expect(refused).toEqual({ result: 0, messages: [] });
      expect(await lockToken(redis, second.lease.lockKey)).toBe(second.lease.token);

      const now = (await redis.get(second.lease.lockKey))!;
      const released = await wakeUps(redis, channel, () => forceReleaseScript(redis, [second.lease.lockKey], [now, channel]));
      expect(released).toEqual({ result: 1, messages: ['release'] });
      expect(await redis.exists(second.lease.lockKey)).toBe(0);
    });

    it('refuses a lock renewed or rewritten since it was read, and a lock that is gone', async () => {
      const { redis, prefix } = fx;
      const key = new FireOnceKeys(prefix).lock(target.scope, target.step);
      await writeLock(redis, key, 'tok', { fencingToken: 7 });
      const read = (await redis.get(key))!;
      await writeLock(redis, key, 'tok', { fencingToken: 8 });
      expect(await forceReleaseScript(redis, [key], [read, 'ch'])).toBe(0);
      expect(await redis.exists(key)).toBe(1);
      expect(await forceReleaseScript(redis, [key], [(await redis.get(key))!, 'ch'])).toBe(1);
      expect(await redis.exists(key)).toBe(0);
      expect(await forceReleaseScript(redis, [key], [read, 'ch'])).toBe(0); // gone: nothing to do
    });
  });

  it('release --force: a lock that passes to another holder between the read and the delete is left alone, exit 5, nothing logged', async () => {
    const { redis, guard } = fx;
    const first = await guard.acquire(target);
    if (first.kind !== 'acquired') throw new Error('expected acquired');
    let second: Awaited<ReturnType<typeof guard.acquire>> | undefined;
    // The CLI's client, whose read of the lock lets another holder take it just after.
    const racing = new Proxy(redis, {
      get: (client, name) =>
        name === 'get'
          ? async (key: string) => {
              const value = await client.get(key);
              await client.del(key);
              second = await guard.acquire(target);
              return value;
            }
          : (Reflect.get(client, name) as unknown),
    });
    const err = await release(racing, guard.keys, target.scope, target.step, true).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CliError);
    expect((err as CliError).exitCode).toBe(EXIT.conflict);
    if (second?.kind !== 'acquired') throw new Error(`expected the other holder to acquire, got ${second?.kind}`);
    expect(await lockToken(redis, second.lease.lockKey)).toBe(second.lease.token);
    expect(await redis.exists(guard.keys.log())).toBe(0);
  });

  describe('find-latest.lua (through findLatest)', () => {
    it('finds the newest matching entry, across more than one script call, and undefined when none matches', async () => {
      const { redis, prefix } = fx;
      const log = new FireOnceKeys(prefix).log();
      const pipeline = redis.pipeline();
      pipeline.xadd(log, '*', 'decision', 'committed', 'scope', 's', 'jobType', 'j', 'runId', 'old');
      pipeline.xadd(log, '*', 'decision', 'committed', 'scope', 's', 'jobType', 'j', 'runId', 'wanted');
      // More than one call's worth of newer entries that do not match.
      for (let i = 0; i < PAGE_SIZE + 10; i++) pipeline.xadd(log, '*', 'decision', 'committed', 'scope', 'other', 'jobType', 'j');
      await pipeline.exec();
      const found = await findLatest(redis, log, { decision: 'committed', scope: 's', jobType: 'j' });
      expect(found?.event.runId).toBe('wanted');
      expect(await findLatest(redis, log, { decision: 'committed', scope: 's', jobType: 'k' })).toBeUndefined();
      // A field the entry lacks counts as '': a match on holder '' finds entries without one.
      expect((await findLatest(redis, log, { scope: 's', holder: '' }))?.event.runId).toBe('wanted');
    });
  });
});
