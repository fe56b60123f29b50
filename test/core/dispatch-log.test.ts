import { FireOnceConfigError } from '../../src';
import { DispatchLog } from '../../src/core';
import { useGuardFixture } from '../support/redis';

// `DispatchLog` is public (`temporal-fire-once/core`), for code that writes the log by hand. Its
// cap goes to every XADD as `MAXLEN ~ <maxLen>`: a value that is no positive integer made Redis
// refuse every batch (NaN, 1.5, -5), so the log was lost without an error, or trimmed the stream
// to almost nothing (0), where `fire-once report` looks for duplicates.
describe('DispatchLog', () => {
  const fx = useGuardFixture('dispatch-log');

  it.each([[NaN], [0], [-5], [1.5], ['100'], [undefined]])('refuses a maxLen of %p with FireOnceConfigError, naming it', async (maxLen) => {
    expect(() => new DispatchLog(fx.redis, fx.guard.keys, maxLen as number)).toThrow(
      new FireOnceConfigError(`DispatchLog: maxLen must be a positive integer (got ${typeof maxLen === 'string' ? `"${maxLen}"` : String(maxLen)})`),
    );
    expect(await fx.redis.exists(fx.guard.keys.log())).toBe(0);
  });

  it('appends with a positive cap', async () => {
    const log = new DispatchLog(fx.redis, fx.guard.keys, 1_000);
    log.record({ decision: 'dispatched', scope: 's', step: 'st', jobType: 'j' });
    await log.flush();
    expect([log.dropped, await fx.redis.xlen(fx.guard.keys.log())]).toEqual([0, 1]);
  });

  it('counts the entries of a batch Redis refuses in dropped, and goes on with the next batch', async () => {
    const log = new DispatchLog(fx.redis, fx.guard.keys, 1_000);
    await fx.redis.set(fx.guard.keys.log(), 'not a stream'); // every XADD to it is WRONGTYPE
    for (const scope of ['a', 'b', 'c']) log.record({ decision: 'dispatched', scope, step: 'st', jobType: 'j' });
    await log.flush();
    expect(log.dropped).toBe(3);
    await fx.redis.del(fx.guard.keys.log());
    log.record({ decision: 'dispatched', scope: 'd', step: 'st', jobType: 'j' });
    await log.flush();
    expect([log.dropped, await fx.redis.xlen(fx.guard.keys.log())]).toEqual([3, 1]);
  });
});
