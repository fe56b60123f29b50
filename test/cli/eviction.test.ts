import { Redis } from 'ioredis';
import { main, type Io } from '../../src/cli/main';
import { EXIT } from '../../src/cli/exit-codes';
import { FireOnceKeys } from '../../src/core';
import { spawnRedisServer, type SpawnedRedis } from '../support/redis-server';
import { runCli } from './run-cli';

// Every command of the CLI refuses a Redis that can evict the guard's keys, as a worker does:
// exit code 6 and what to set, before it reads or writes anything; --allow-evicting-redis runs
// it anyway with a warning on stderr. Most runs are in-process (main() with captured output); one
// is a real process, for the exit code as a shell sees it.
describe('fire-once CLI on an evicting Redis', () => {
  let server: SpawnedRedis;
  let admin: Redis;

  beforeAll(async () => {
    server = await spawnRedisServer(['--maxmemory-policy', 'volatile-lru']);
    admin = new Redis(server.url);
  });
  afterAll(async () => {
    admin?.disconnect();
    await server?.stop();
  });

  async function cli(args: readonly string[], url = server.url): Promise<{ code: number; out: string; err: string }> {
    let out = '';
    let err = '';
    const io: Io = { out: (t) => (out += t), err: (t) => (err += t) };
    const code = await main(['node', 'fire-once', ...args, '--redis', url], io);
    return { code, out, err };
  }

  const commands: [string, string[]][] = [
    ['report', ['report']],
    ['inspect', ['inspect', 's']],
    ['release', ['release', 's', '--step', 'x', '--force']],
    ['invalidate', ['invalidate', 's', '--job-type', 'j', '--force']],
  ];

  it.each(commands)('%s exits 6, naming the policy and what to set, and changes nothing', async (_name, args) => {
    await admin.set('cli-eviction:canary', '1');
    const run = await cli(args);
    expect(run).toEqual({
      code: EXIT.evicting,
      out: '',
      err: expect.stringMatching(
        /^fire-once: Redis at 127\.0\.0\.1:\d+ has maxmemory-policy volatile-lru: .*Set `maxmemory-policy noeviction`.*pass --allow-evicting-redis to accept the risk\n$/,
      ),
    });
    expect(await admin.dbsize()).toBe(1); // no dispatch-log entry, nothing written
  });

  it('with --allow-evicting-redis the command runs, with a warning on stderr', async () => {
    await admin.xadd(new FireOnceKeys('fire-once').log(), '1-1', 'decision', 'dispatched'); // a log, all of it before the window
    const run = await cli(['report', '--json', '--allow-evicting-redis']);
    expect(run.code).toBe(EXIT.ok);
    expect(JSON.parse(run.out)).toMatchObject({ events: 0 });
    expect(run.err).toMatch(/^fire-once: warning: Redis at .* has maxmemory-policy volatile-lru: .*going on because of --allow-evicting-redis\n$/);
  });

  it('an ACL user that may run neither INFO nor CONFIG is refused too: its policy cannot be read', async () => {
    await admin.call('ACL', 'SETUSER', 'cli-no-info', 'reset', 'on', '>pw', '~p:*', '+@read', '+@connection', '+time', '+evalsha', '+eval');
    const u = new URL(server.url);
    u.username = 'cli-no-info';
    u.password = 'pw';
    const run = await cli(['report', '--prefix', 'p'], u.toString());
    expect(run.code).toBe(EXIT.evicting);
    expect(run.err).toMatch(/could not be read \(INFO memory: NOPERM.*grant the user \+info/);
  });

  it('as a process: exit code 6', async () => {
    const run = await runCli(['inspect', 's', '--redis', server.url]);
    expect(run.code).toBe(6);
    expect(run.stderr).toContain('has maxmemory-policy volatile-lru');
  });
});
