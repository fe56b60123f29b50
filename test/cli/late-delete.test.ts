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
    const ran = deleted(fx.redis, `${fx.prefix}:a`, undefined, async () => {
      await fx.redis.del(`${fx.prefix}:a`);
      throw timedOut();
    });
    await expect(ran).resolves.toBeUndefined();
  });

  it('counts as done for a lock that holds another value than the one read (deleted, then taken again)', async () => {
    await fx.redis.set(`${fx.prefix}:l`, 'token-2 …');
    await expect(deleted(fx.redis, `${fx.prefix}:l`, 'token-1 …', () => Promise.reject(timedOut()))).resolves.toBeUndefined();
  });

  it('fails as before when the key is still there, saying the delete may still run', async () => {
    await fx.redis.set(`${fx.prefix}:b`, 'artifact');
    await expect(deleted(fx.redis, `${fx.prefix}:b`, undefined, () => Promise.reject(timedOut()))).rejects.toThrow(
      `Command timed out: the delete of ${fx.prefix}:b may still run when Redis answers; check with fire-once inspect`,
    );
    await expect(deleted(fx.redis, `${fx.prefix}:b`, 'artifact', () => Promise.reject(timedOut()))).rejects.toThrow(/may still run/);
  });

  it('leaves any other error as it is', async () => {
    await expect(deleted(fx.redis, `${fx.prefix}:c`, undefined, () => Promise.reject(new Error('NOPERM no permissions')))).rejects.toThrow(
      /^NOPERM no permissions$/,
    );
  });
});
