import { Redis } from 'ioredis';
import { CLI_NEEDS } from '../../src/cli/doctor/acl-check';
import { FireOnceGuard } from '../../src';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';
import { runCli } from './run-cli';
import { documentedCliGrant } from '../security/acl-rules';

// `release --force` and `invalidate --force` as a Redis ACL user: what docs/operating.md tells an
// operator to grant must be enough, and a user that lacks a permission their scripts need must
// find everything as it was (exit 3), never a lock or artifact deleted with nothing recorded.
// Spawns CLI processes; slow on a loaded 2-core machine.
jest.setTimeout(300_000);

describe('fire-once release and invalidate as an ACL user', () => {
  let redis: Redis;
  const prefixes: string[] = [];
  const users: string[] = [];

  beforeAll(() => {
    redis = connectRedis();
  });
  afterAll(async () => {
    for (const user of users) await redis.call('ACL', 'DELUSER', user);
    for (const prefix of prefixes) await deletePrefix(redis, prefix);
    await redis.quit();
  });

  /** A prefix of its own with a lock held on (s, summarise) and an artifact stored for (s, summary). */
  async function fresh(name: string): Promise<{ prefix: string; guard: FireOnceGuard; lockKey: string; artifactKey: string }> {
    const prefix = testPrefix(name);
    prefixes.push(prefix);
    const guard = new FireOnceGuard({ redis, keyPrefix: prefix });
    const held = await guard.acquire({ scope: 's', step: 'summarise', jobType: 'summary' });
    const done = await guard.acquire({ scope: 's', step: 'summarise-once', jobType: 'summary' });
    if (held.kind !== 'acquired' || done.kind !== 'acquired') throw new Error(`${held.kind} ${done.kind}`);
    await guard.commit(done.lease, Buffer.from('result'));
    return { prefix, guard, lockKey: held.lease.lockKey, artifactKey: guard.keys.artifact('s', 'summary') };
  }

  /** A user with `rules`, as a URL the CLI can log in with. */
  async function userWith(name: string, rules: readonly string[]): Promise<string> {
    users.push(name);
    await redis.call('ACL', 'SETUSER', name, 'reset', 'on', '>acl-pw', ...rules);
    const u = new URL(process.env.REDIS_URL!);
    u.username = name;
    u.password = 'acl-pw';
    return u.toString();
  }

  it("docs/operating.md's grant is doctor's acl-cli list on the prefix's keys and channels, and no category", () => {
    expect(documentedCliGrant('P')).toEqual(['~P:*', '&P:*', ...Object.keys(CLI_NEEDS).map((command) => `+${command}`)]);
  });

  it('with the grant docs/operating.md names, report and inspect read, release --force and invalidate --force both act, and no command without keys that could harm the server is granted', async () => {
    const { prefix, lockKey, artifactKey } = await fresh('cli-acl-grant');
    const url = await userWith(`cli-acl-grant-${prefix}`, documentedCliGrant(prefix));
    for (const args of [['report'], ['inspect', 's']]) {
      const read = await runCli([...args, '--prefix', prefix, '--redis', url]);
      expect([read.code, read.stderr]).toEqual([args[0] === 'report' ? 4 : 0, args[0] === 'report' ? expect.stringMatching(/^no dispatch log at /) : '']);
    }
    // migrate reads 0.1's hashes: a 0.1 artifact under a prefix of its own (the grant's pattern).
    const legacy = `${prefix}:legacy`;
    prefixes.push(legacy);
    await redis.hset(`${legacy}:{chat-1}:artifact:summary`, 'p', 'result', 'h', '');
    const legacyUrl = await userWith(`cli-acl-legacy-${prefix}`, documentedCliGrant(legacy));
    const migrated = await runCli(['migrate', '--prefix', legacy, '--redis', legacyUrl, '--json']);
    expect([migrated.code, migrated.stderr, JSON.parse(migrated.stdout || '{}').copied]).toEqual([0, '', 1]);
    // A URL that names a database: the grant with +select, as docs/operating.md says (without it, exit 3).
    const inDb1 = new URL(await userWith(`cli-acl-db-${prefix}`, [...documentedCliGrant(prefix), '+select']));
    inDb1.pathname = '/1';
    const selected = await runCli(['inspect', 's', '--prefix', prefix, '--redis', inDb1.toString()]);
    expect([selected.code, selected.stderr]).toEqual([0, '']);
    const operator = new Redis(url);
    try {
      for (const command of [
        ['FLUSHALL'],
        ['FLUSHDB'],
        ['SWAPDB', '0', '1'],
        ['CLIENT', 'LIST'],
        ['CLIENT', 'KILL', 'ID', '1'],
        ['CONFIG', 'GET', 'maxmemory'],
        ['KEYS', '*'],
      ]) {
        await expect(operator.call(command[0], ...command.slice(1))).rejects.toThrow(/^NOPERM/);
      }
    } finally {
      operator.disconnect();
    }
    const released = await runCli(['release', 's', '--step', 'summarise', '--prefix', prefix, '--force', '--redis', url]);
    expect(released.stderr).toBe('');
    expect(released.code).toBe(0);
    const invalidated = await runCli(['invalidate', 's', '--job-type', 'summary', '--prefix', prefix, '--force', '--redis', url]);
    expect(invalidated.stderr).toBe('');
    expect(invalidated.code).toBe(0);
    expect(await redis.exists(lockKey, artifactKey)).toBe(0);
  });

  it("as docs/reliability.md's least-privilege worker user, report and inspect exit 3 naming the fix", async () => {
    const { prefix } = await fresh('cli-acl-worker');
    const rules = `~${prefix}:* &${prefix}:* +evalsha +eval +get +set +del +exists +pttl +pexpire +time +lrange +rpush +publish +xadd +subscribe +unsubscribe +info`;
    const url = await userWith(`cli-acl-worker-${prefix}`, rules.split(' '));
    for (const args of [['report'], ['inspect', 's']]) {
      const run = await runCli([...args, '--prefix', prefix, '--redis', url]);
      expect(run.stderr).toMatch(/NOPERM this user has no permissions to run the '(xrange|scan)' command/);
      expect(run.stderr).toContain(`lacks a permission the CLI needs: grant what docs/operating.md names, or run fire-once doctor --prefix ${prefix}`);
      expect(run.code).toBe(3);
    }
  });

  it('without +publish, release --force and invalidate --force exit 3 and change nothing: the lock, the artifact and the log stay as they were', async () => {
    const { prefix, guard, lockKey, artifactKey } = await fresh('cli-acl-nopub');
    const rules = [`~${prefix}:*`, '+@read', '+@write', '+@connection', '+time', '+evalsha', '+eval', '+info'];
    const url = await userWith(`cli-acl-nopub-${prefix}`, rules);
    const [lock, artifact, logLength] = [await redis.get(lockKey), await redis.getBuffer(artifactKey), await redis.xlen(guard.keys.log())];
    for (const args of [
      ['release', 's', '--step', 'summarise'],
      ['invalidate', 's', '--job-type', 'summary'],
    ]) {
      const run = await runCli([...args, '--prefix', prefix, '--force', '--redis', url]);
      expect(run.stderr).toMatch(/can't run this command|NOPERM/);
      // Redis's reply inside a script names no command: the message points to the grant and to doctor.
      expect(run.stderr).toContain(`lacks a permission the CLI needs: grant what docs/operating.md names, or run fire-once doctor --prefix ${prefix}`);
      expect(run.code).toBe(3);
    }
    expect(await redis.get(lockKey)).toBe(lock);
    expect(await redis.getBuffer(artifactKey)).toEqual(artifact);
    expect(await redis.xlen(guard.keys.log())).toBe(logLength);
  });
});
