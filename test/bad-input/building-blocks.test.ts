import { FireOnceConfigError, FireOncePlugin } from '../../src';
import { DispatchLog, ParkedWatch, ParkingLot, WakeHub, claimProtocol, createFireOnceActivityInterceptor } from '../../src/core';
import { differences, useBadInputFixture } from '../support/bystander';

/** What `fn` did instead of throwing a FireOnceConfigError whose message matches `message`, or "". */
async function problem(where: string, fn: () => unknown, message: RegExp): Promise<string> {
  try {
    await fn();
    return `${where}: accepted`;
  } catch (err) {
    if (!(err instanceof FireOnceConfigError)) return `${where}: threw ${(err as Error).name}: ${(err as Error).message}`;
    return message.test(err.message) ? '' : `${where}: message ${JSON.stringify(err.message)} does not match ${message}`;
  }
}

const BAD_TIMEOUTS: readonly unknown[] = [NaN, -5, 0, 1.5, Infinity, '100', null];

// temporal-fire-once/core's building blocks, as a worker wired by hand calls them: a bad argument
// is refused with a FireOnceConfigError naming it, not a TypeError from deep inside, and nothing
// is written (defect 167 in docs/reliability.md).
describe('bad input: the building blocks of temporal-fire-once/core', () => {
  const fx = useBadInputFixture('bad-parts');

  it('createFireOnceActivityInterceptor refuses a config that is no object', async () => {
    const problems = await Promise.all(
      [undefined, null, 'guard', 5, []].map((config) =>
        problem(
          `config ${JSON.stringify(config)}`,
          // @ts-expect-error not a config
          () => createFireOnceActivityInterceptor(config),
          /^createFireOnceActivityInterceptor: options must be an object \(got /,
        ),
      ),
    );
    expect(problems.filter(Boolean)).toEqual([]);
  });

  it('localCache refuses an array', async () => {
    // @ts-expect-error an array is no cache bounds
    const result = await problem('localCache []', () => new FireOncePlugin({ redis: fx.redis, localCache: [] }), /localCache must be a boolean or \{/);
    expect(result).toBe('');
  });

  it('DispatchLog.flush and ParkedWatch.close refuse a timeout that is no positive integer, before they act', async () => {
    const log = new DispatchLog(fx.redis, fx.guard.keys, 100);
    const watch = new ParkedWatch(new ParkingLot(fx.guard), 1_000);
    const problems = await Promise.all(
      BAD_TIMEOUTS.flatMap((timeout) => [
        problem(`flush(${String(timeout)})`, () => log.flush(timeout as number), /^DispatchLog\.flush: timeoutMs must be a positive integer \(got /),
        problem(`close(${String(timeout)})`, () => watch.close(timeout as number), /^ParkedWatch\.close: timeoutMs must be a positive integer \(got /),
      ]),
    );
    // Past what a Node.js timer waits, the wait would give up at once.
    problems.push(
      await problem('flush(2 ** 31)', () => log.flush(2 ** 31), /^DispatchLog\.flush: timeoutMs must be at most 2147483647 ms \(got 2147483648\)$/),
      await problem('close(2 ** 31)', () => watch.close(2 ** 31), /^ParkedWatch\.close: timeoutMs must be at most 2147483647 ms \(got 2147483648\)$/),
    );
    expect(problems.filter(Boolean)).toEqual([]);
    expect(await log.flush(1_000)).toBe(0);
    expect(await watch.close(1_000)).toBe(0);
  });

  it('claimProtocol, WakeHub and DispatchLog refuse what is no ioredis client, and write nothing', async () => {
    const problems = await Promise.all(
      ([undefined, null, 'redis://localhost:6379', {}] as never[]).flatMap((redis) => [
        problem(
          `claimProtocol(${JSON.stringify(redis)})`,
          () => claimProtocol(redis, fx.guard.keys),
          /^claimProtocol: redis must be an ioredis Redis or Cluster instance/,
        ),
        problem(`new WakeHub(${JSON.stringify(redis)})`, () => new WakeHub(redis), /^WakeHub: redis must be an ioredis Redis or Cluster instance/),
        problem(
          `new DispatchLog(${JSON.stringify(redis)})`,
          () => new DispatchLog(redis, fx.guard.keys, 100),
          /^DispatchLog: redis must be an ioredis Redis or Cluster instance/,
        ),
      ]),
    );
    expect(problems.filter(Boolean)).toEqual([]);
    expect(await differences(fx.redis, fx.before)).toEqual([]);
  });
});
