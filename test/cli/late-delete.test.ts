import { FireOnceStoreUnavailable } from '../../src';
import { deleted } from '../../src/cli/connect';
import { useGuardFixture } from '../support/redis';

// `release --force` and `invalidate --force` delete, then record the delete in the dispatch log.
// A delete whose answer came past --timeout may have run all the same: it was reported failed
// (exit 3) and never recorded, so `fire-once report` took the next dispatch for a duplicate. The
// key is now read again: gone, the delete counts as done; still there, the error says it may run
// yet. The timeout is ioredis's own error, thrown after (or instead of) a real delete.
describe('a CLI delete whose answer came too late', () => {
  const fx = useGuardFixture('cli-late-delete');
  const timedOut = () => new Error('Command timed out');

  it('counts as done when Redis ran it: the key is gone', async () => {
    await fx.redis.set(`${fx.prefix}:a`, 'artifact');
    const ran = deleted(fx.redis, `${fx.prefix}:a`, async () => {
      await fx.redis.del(`${fx.prefix}:a`);
      throw timedOut();
    });
    await expect(ran).resolves.toBeUndefined();
  });

  it('fails for a lock that now holds another value: a compare-and-delete refused deletes nothing', async () => {
    await fx.redis.set(`${fx.prefix}:l`, 'token-2 …');
    await expect(deleted(fx.redis, `${fx.prefix}:l`, () => Promise.reject(timedOut()))).rejects.toThrow(/whether the delete .* ran is unknown/);
  });

  it('fails as before when the key is still there, saying the delete may still run', async () => {
    await fx.redis.set(`${fx.prefix}:b`, 'artifact');
    await expect(deleted(fx.redis, `${fx.prefix}:b`, () => Promise.reject(timedOut()))).rejects.toThrow(
      `Command timed out: whether the delete of ${fx.prefix}:b ran is unknown (it may still run when Redis answers); check with fire-once inspect`,
    );
  });

  it("leaves an error Redis answered as it is, the guard's wrapping of one included: that delete never runs", async () => {
    await expect(deleted(fx.redis, `${fx.prefix}:c`, () => Promise.reject(new Error('NOPERM no permissions')))).rejects.toThrow(/^NOPERM no permissions$/);
    await fx.redis.set(`${fx.prefix}:c`, 'artifact');
    const refused = new FireOnceStoreUnavailable("Redis call failed: NOPERM this user has no permissions to run the 'publish' command");
    await expect(deleted(fx.redis, `${fx.prefix}:c`, () => Promise.reject(refused))).rejects.toThrow(/^Redis call failed: NOPERM [^:]*command$/);
  });
});
