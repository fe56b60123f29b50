import { Redis } from 'ioredis';
import { FireOnceGuard } from '../../../src';
import { FireOnceKeys } from '../../../src/core';
import { EXIT } from '../../../src/cli/exit-codes';
import { runCli } from '../run-cli';
import { SAFE_ARGS, doctor, doctorJson, serverWith, statuses, verdictsOf, type ServerWithAdmin } from './support';

// `fire-once doctor` on single redis-servers spawned in the good and the bad configurations: one
// verdict per check, and exit 0 only when nothing puts the guarantee at risk.
describe('fire-once doctor on a standalone Redis', () => {
  const servers: ServerWithAdmin[] = [];
  const spawn = async (...args: string[]) => {
    const s = await serverWith(...args);
    servers.push(s);
    return s;
  };
  afterAll(() => Promise.all(servers.map((s) => s.stop())));

  it('keys of 0.1 (protocol v2) under a prefix: a warning that names fire-once migrate', async () => {
    const { server, admin } = await spawn(...SAFE_ARGS);
    await admin.hset('old:{session-1}:artifact:summary', 'p', 'x', 'h', '');
    await new FireOnceGuard({ redis: admin, keyPrefix: 'app' }).acquire({ scope: 's', step: 'send', jobType: 'send' });
    const prefixes = verdictsOf(await doctorJson(server.url, ['--prefix', 'app']), 'prefixes')[0];
    expect(prefixes).toMatchObject({ status: 'warn', message: expect.stringMatching(/^keys of 0\.1 \(protocol v2\) under old, which 0\.2 never reads/) });
    // The command to paste carries the --redis doctor was given (and the prefix found).
    expect(prefixes.fix).toBe(`stop the 0.1 workers, then run npx fire-once migrate --redis ${server.url} --prefix old (docs/upgrading.md)`);
  });

  it("keys of 0.1 that migrate leaves (another Redis type, a job's external key) are not flagged, and a mistyped --prefix is warned of beside 0.1 keys", async () => {
    const { server, admin } = await spawn(...SAFE_ARGS);
    await admin.rpush('old:{chat-3}:artifact:summary', 'x'); // a list, not a 0.1 artifact: migrate skips it
    await admin.set('old:{chat-3}:external:summary', 'written by the job');
    await new FireOnceGuard({ redis: admin, keyPrefix: 'app' }).acquire({ scope: 's', step: 'send', jobType: 'send' });
    const quiet = verdictsOf(await doctorJson(server.url, ['--prefix', 'app']), 'prefixes')[0];
    expect(quiet).toMatchObject({ status: 'ok' });

    await admin.hset('old:{chat-4}:artifact:summary', 'p', 'x', 'h', '');
    const both = verdictsOf(await doctorJson(server.url, ['--prefix', 'ap']), 'prefixes')[0];
    expect(both).toMatchObject({
      status: 'warn',
      message: expect.stringMatching(/^keys of 0\.1 \(protocol v2\) under old, .*; and no key under --prefix ap in /),
    });
    expect(both.fix).toMatch(/^stop the 0\.1 workers, then run npx fire-once migrate .*; and pass the keyPrefix the workers use as --prefix/);
  });

  it("the workers' keys in another database: the prefixes warning names that database and the --redis that reaches it", async () => {
    const { server } = await spawn(...SAFE_ARGS);
    const db3 = new Redis(`${server.url}/3`);
    try {
      await new FireOnceGuard({ redis: db3, keyPrefix: 'app' }).acquire({ scope: 's', step: 'send', jobType: 'send' });
    } finally {
      db3.disconnect();
    }
    const prefixes = verdictsOf(await doctorJson(server.url, ['--prefix', 'app']), 'prefixes')[0];
    expect(prefixes).toMatchObject({ status: 'warn', message: expect.stringMatching(/^no key under --prefix app in all 0 keys scanned/) });
    expect(prefixes.fix).toContain(`database 3 holds 1 key(s): if the workers use it, give it in --redis (${server.url}/3)`);
  });

  it("finds a prefix by its dispatch log alone, once its locks and artifacts have expired, with the log's namespace", async () => {
    const { server, admin } = await spawn(...SAFE_ARGS);
    await admin.xadd(new FireOnceKeys('app', 'tenant-b').log(), '*', 'decision', 'dispatched');
    await admin.set('unrelated:v3:x:logbook', 'v'); // not a log key: no guard prefix
    const prefixes = verdictsOf(await doctorJson(server.url, ['--prefix', 'app']), 'prefixes')[0];
    expect(prefixes).toMatchObject({ status: 'ok', message: 'all 2 keys scanned; guard prefixes: app (1 keys; namespaces tenant-b)' });
  });

  it('looks at no more keys than --scan-budget, although SCAN may answer with more', async () => {
    const { server, admin } = await spawn(...SAFE_ARGS);
    // A SCAN with a small COUNT often answers with a key or two more, on a keyspace this small.
    await admin.mset(Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`other:${i}`, 'v'])));
    for (let budget = 1; budget <= 8; budget++) {
      const prefixes = verdictsOf(await doctorJson(server.url, ['--prefix', 'app', '--scan-budget', String(budget)]), 'prefixes')[0];
      expect(prefixes.message).toContain(` in ${budget} of 40 keys scanned (--scan-budget)`);
    }
  });

  it('escapes control characters in the namespaces it lists, so a key cannot forge a verdict line; --json keeps them', async () => {
    const { server, admin } = await spawn(...SAFE_ARGS);
    await new FireOnceGuard({ redis: admin, keyPrefix: 'app' }).acquire({ scope: 's', step: 'send', jobType: 'send' });
    // A key in the guard's layout whose namespace decodes to a newline, a forged verdict and an ANSI escape.
    await admin.set('app:v3:{x%0Aok%20%20%20%20eviction%20%20%20%20fake%1B%5B2J/s}:l:send', 'v');
    const run = await doctor(server.url, ['--prefix', 'app']);
    const line = run.out.split('\n').find((l) => l.includes(' prefixes '));
    expect(line).toContain('namespaces default, x\\nok    eviction    fake\\u001b[2J');
    expect(run.out.split('\n').filter((l) => /^ok +eviction/.test(l))).toHaveLength(1);
    expect(run.out.replace(/\n/g, '')).not.toMatch(/\p{Cc}/u);
    const json = verdictsOf(await doctorJson(server.url, ['--prefix', 'app']), 'prefixes')[0];
    expect(json.message).toContain('x\nok    eviction    fake\u001b[2J');
  });

  it('AOF with appendfsync always and noeviction: every verdict ok, the prefix found, exit 0', async () => {
    const { server, admin } = await spawn(...SAFE_ARGS);
    const guard = new FireOnceGuard({ redis: admin, keyPrefix: 'app' });
    await guard.acquire({ scope: 's', step: 'send', jobType: 'send' });
    const report = await doctorJson(server.url, ['--prefix', 'app']);
    expect(report.exitCode).toBe(EXIT.ok);
    expect(statuses(report)).toEqual({
      version: 'ok',
      eviction: 'ok',
      persistence: 'ok',
      replicas: 'ok',
      'min-replicas': 'ok',
      scripts: 'ok',
      'acl-worker': 'ok',
      'acl-cli': 'ok',
      cluster: 'ok',
      prefixes: 'ok',
    });
    expect(report).toMatchObject({ topology: 'standalone', primaries: [`127.0.0.1:${server.port}`], minimumVersion: '5.0.0' });
    expect(verdictsOf(report, 'version')[0].message).toMatch(/^Redis \d+\.\d+\.\d+ \(the library needs 5\.0\.0 or later/);
    expect(verdictsOf(report, 'scripts')[0].message).toMatch(/EVAL runs; 1 of \d guard scripts cached \(fireOnceAcquireV\d\)/);
    expect(verdictsOf(report, 'prefixes')[0].message).toMatch(/guard prefixes: app \(1 keys; namespaces default\)/); // the lock

    const human = await doctor(server.url, ['--prefix', 'app']);
    expect(human.code).toBe(0);
    const lines = human.out.trimEnd().split('\n');
    expect(lines[0]).toBe(`fire-once doctor: redis://127.0.0.1:${server.port} (standalone, 1 primary)`);
    expect(lines.slice(1, -1).every((line) => /^ok {4}\S/.test(line))).toBe(true);
    expect(lines).toHaveLength(1 + report.verdicts.length + 1);
    expect(lines.at(-1)).toBe('0 fail, 0 unknown, 0 warn, 10 ok: nothing puts the guarantee at risk (exit 0)');
  });

  it('no AOF: persistence fails, saying what a restart loses and what to set; exit 1', async () => {
    const { server } = await spawn('--maxmemory-policy', 'noeviction');
    const report = await doctorJson(server.url);
    expect(report.exitCode).toBe(EXIT.atRisk);
    expect(verdictsOf(report, 'persistence')).toEqual([
      expect.objectContaining({
        status: 'fail',
        message: expect.stringMatching(/^AOF is off: a restart or crash of Redis loses every lock/),
        fix: expect.stringContaining('appendonly yes and appendfsync always'),
      }),
    ]);
    expect(report.verdicts.filter((v) => v.status !== 'ok').map((v) => v.check)).toEqual(['persistence', 'prefixes']); // prefixes: warn, no key yet
    const human = await doctor(server.url);
    expect(human.out).toMatch(/^FAIL {2}persistence {2}127\.0\.0\.1:\d+ {2}AOF is off: .*\. Fix: appendonly yes and appendfsync always/m);
    expect(human.out.trimEnd().split('\n').at(-1)).toBe('1 fail, 0 unknown, 1 warn, 8 ok: the guarantee is at risk (exit 1)');
  });

  it('AOF with appendfsync everysec: persistence fails (a host crash loses the last second); fix appendfsync always', async () => {
    const { server } = await spawn('--appendonly', 'yes', '--appendfsync', 'everysec');
    const [persistence] = verdictsOf(await doctorJson(server.url), 'persistence');
    expect(persistence).toMatchObject({
      status: 'fail',
      message: expect.stringContaining('appendfsync everysec: a crash of the host loses the last second or two'),
      fix: 'appendfsync always',
    });
  });

  it('volatile-lru: eviction fails (workers refuse to start), fix maxmemory-policy noeviction; exit 1', async () => {
    const { server } = await spawn('--appendonly', 'yes', '--appendfsync', 'always', '--maxmemory-policy', 'volatile-lru');
    const report = await doctorJson(server.url);
    expect(report.exitCode).toBe(EXIT.atRisk);
    expect(verdictsOf(report, 'eviction')).toEqual([
      expect.objectContaining({
        status: 'fail',
        message: expect.stringMatching(/^maxmemory-policy volatile-lru evicts live locks and artifacts/),
        fix: expect.stringMatching(/^maxmemory-policy noeviction/),
      }),
    ]);
    // The same as a process, as a shell sees it: doctor itself runs on an evicting Redis.
    const run = await runCli(['doctor', '--redis', server.url]);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/^FAIL {2}eviction +127\.0\.0\.1:\d+ {2}maxmemory-policy volatile-lru/m);
  });

  it('a primary with a replica: replica-sync ok, min-replicas 0 a warning; a frozen replica shows its lag and fails replicas too', async () => {
    const primary = await spawn(...SAFE_ARGS);
    const replica = await spawn(...SAFE_ARGS, '--replicaof', '127.0.0.1', String(primary.server.port));
    for (let i = 0; !/slave0:.*state=online/.test(await primary.admin.info('replication')); i++) {
      if (i > 200) throw new Error('the replica did not come online');
      await new Promise((r) => setTimeout(r, 50));
    }
    const healthy = await doctorJson(primary.server.url);
    expect(verdictsOf(healthy, 'replicas')).toEqual([
      expect.objectContaining({ status: 'ok', message: expect.stringMatching(/^1 replica\(s\) online \(127\.0\.0\.1:\d+ online, lag [01] s/) }),
    ]);
    expect(verdictsOf(healthy, 'replica-sync')).toEqual([
      expect.objectContaining({ status: 'ok', message: expect.stringContaining("replicaSync 'auto', the default") }),
    ]);
    expect(verdictsOf(healthy, 'min-replicas')).toEqual([
      expect.objectContaining({ status: 'warn', fix: 'min-replicas-to-write 1 and min-replicas-max-lag 10' }),
    ]);

    await primary.admin.config('SET', 'min-replicas-to-write', '1');
    expect(verdictsOf(await doctorJson(primary.server.url), 'min-replicas')[0].status).toBe('ok');

    const pid = await replica.pid();
    process.kill(pid, 'SIGSTOP');
    try {
      await new Promise((r) => setTimeout(r, 4_000)); // no acknowledgement for 4 s
      const lagging = await doctorJson(primary.server.url);
      expect(verdictsOf(lagging, 'replicas')).toEqual([
        expect.objectContaining({
          status: 'fail',
          message: expect.stringMatching(/^1 of 1 replica\(s\) not online or lagging more than 2 s \(127\.0\.0\.1:\d+ online, lag [3-9] s/),
        }),
      ]);
      expect(lagging.exitCode).toBe(EXIT.atRisk);
      // min-replicas-max-lag (10 s) has not run out yet: writes are still accepted.
      expect(verdictsOf(lagging, 'min-replicas')[0].status).toBe('ok');
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    // Asked at the replica, doctor says to point at the primary.
    expect(verdictsOf(await doctorJson(replica.server.url), 'role')).toEqual([
      expect.objectContaining({
        status: 'fail',
        message: expect.stringMatching(/^this node is a replica of 127\.0\.0\.1:\d+: a worker pointed here gets READONLY/),
        fix: 'point the workers at the primary or at Sentinel, and --redis at the primary', // the CLI refuses a sentinel
      }),
    ]);
  });

  it('min-replicas-to-write 1 without a replica: a warning that the primary refuses every write (the guard fails closed)', async () => {
    const { server } = await spawn(...SAFE_ARGS, '--min-replicas-to-write', '1');
    const report = await doctorJson(server.url);
    expect(verdictsOf(report, 'min-replicas')).toEqual([
      expect.objectContaining({
        status: 'warn',
        message: expect.stringMatching(/^min-replicas-to-write 1 with no replica: the primary refuses every write \(NOREPLICAS\)/),
      }),
    ]);
    expect(report.exitCode).toBe(EXIT.ok);
  });

  it('Redis unreachable: exit 3; a bad --scan-budget: exit 2', async () => {
    expect((await doctor('redis://127.0.0.1:1', ['--timeout', '1s'])).code).toBe(EXIT.redis);
    expect(await doctor('redis://127.0.0.1:1', ['--scan-budget', '-1'])).toMatchObject({
      code: EXIT.usage,
      err: expect.stringContaining('--scan-budget must be a positive whole number'),
    });
  });
});
