import { createServer, connect as connectTcp, type Server } from 'node:net';
import { FireOnceStoreUnavailable } from '../../src';
import { deleted } from '../../src/cli/connect';
import { useGuardFixture } from '../support/redis';
import { runCli } from './run-cli';

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

  it("counts as done when the guard passed the client's timeout on (the CLI's invalidate goes through the guard)", async () => {
    await fx.redis.set(`${fx.prefix}:g`, 'artifact');
    const ran = deleted(fx.redis, `${fx.prefix}:g`, async () => {
      await fx.redis.del(`${fx.prefix}:g`);
      throw new FireOnceStoreUnavailable('Redis call failed: Command timed out', {}, { cause: timedOut() });
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

// The same through the CLI, with Redis behind a slow link: the answer to the delete comes 3 s
// late, past --timeout 2s, and every answer after it waits behind it, as on a real link.
describe('fire-once release and invalidate --force over a link that answers the delete late', () => {
  const fx = useGuardFixture('cli-late-link');
  const proxies: Server[] = [];
  afterAll(() => Promise.all(proxies.map((p) => new Promise((resolve) => p.close(resolve)))));

  /** A proxy to the suite's Redis that holds back the answer to the first command whose request holds `marker`. */
  async function slowLink(marker: string): Promise<string> {
    const redis = new URL(process.env.REDIS_URL!);
    const proxy = createServer((client) => {
      const server = connectTcp(Number(redis.port), redis.hostname);
      let holdNext = false;
      let replies = Promise.resolve();
      client.on('data', (d) => {
        if (d.toString('latin1').includes(marker)) holdNext = true;
        server.write(d);
      });
      server.on('data', (d) => {
        const wait = holdNext ? 3_000 : 0;
        holdNext = false;
        replies = replies.then(() => new Promise((r) => setTimeout(r, wait))).then(() => void (client.writable && client.write(d)));
      });
      for (const [a, b] of [
        [client, server],
        [server, client],
      ])
        a.on('error', () => b.destroy()).on('close', () => b.destroy());
    });
    proxies.push(proxy);
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    return `redis://127.0.0.1:${(proxy.address() as { port: number }).port}`;
  }

  it('counts each delete that ran as done, exit 0, and logs it', async () => {
    const { prefix, guard, redis } = fx;
    await redis.set(guard.keys.artifact('t', 'j'), 'x');
    await redis.set(guard.keys.lock('t', 's'), `tok ${Date.now() * 1000} h wf run 1`, 'PX', 600_000);
    const invalidated = await runCli([
      'invalidate',
      't',
      '--job-type',
      'j',
      '--force',
      '--prefix',
      prefix,
      '--redis',
      await slowLink(':invalidations'),
      '--timeout',
      '2s',
    ]);
    const released = await runCli(['release', 't', '--step', 's', '--force', '--prefix', prefix, '--redis', await slowLink(':wake'), '--timeout', '2s']);
    expect([invalidated.code, released.code, invalidated.stderr, released.stderr]).toEqual([0, 0, '', '']);
    expect(await redis.exists(guard.keys.artifact('t', 'j'), guard.keys.lock('t', 's'))).toBe(0);
    const decisions = (await redis.xrange(guard.keys.log(), '-', '+')).map(([, fields]) => fields[fields.indexOf('decision') + 1]);
    expect(decisions.sort()).toEqual(['invalidated', 'release-forced']);
  });
});
