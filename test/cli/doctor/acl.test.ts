import { Redis } from 'ioredis';
import { FireOnceGuard, FireOnceStoreUnavailable } from '../../../src';
import { EXIT } from '../../../src/cli/exit-codes';
import { CLI_NEEDS, CLUSTER_NEEDS, WORKER_NEEDS } from '../../../src/cli/doctor/acl-check';
import { ACL_USER, aclRules, clusterGrants, documentedAclLine, grantedCommands, parseAclLog } from '../../security/acl-rules';
import { SAFE_ARGS, doctorJson, serverWith, statuses, verdictsOf, type ServerWithAdmin } from './support';

// `fire-once doctor` as, and about, ACL users: the documented least-privilege worker user passes
// the worker check and lacks what the CLI needs; a user without +info fails it; an admin can check
// another user with --acl-user. Nothing doctor asks is executed: it asks the server whether it
// would be allowed (redis.acl_check_cmd, ACL DRYRUN).
describe('fire-once doctor and ACL users', () => {
  let s: ServerWithAdmin;
  const prefix = 'acl-doctor';
  const url = (user: string, password: string) => {
    const u = new URL(s.server.url);
    u.username = user;
    u.password = password;
    return u.toString();
  };

  beforeAll(async () => {
    s = await serverWith(...SAFE_ARGS);
    await s.admin.call('ACL', 'SETUSER', ACL_USER, ...aclRules(prefix, 'pw'));
  });
  afterAll(() => s?.stop());

  it("checks exactly the commands docs/reliability.md's least-privilege line grants a worker", () => {
    expect(Object.keys(WORKER_NEEDS).sort()).toEqual(grantedCommands().sort());
  });

  it("checks exactly the commands docs/reliability.md's Cluster line adds, in its order, on a Cluster node", () => {
    expect(Object.keys(CLUSTER_NEEDS)).toEqual(clusterGrants());
  });

  it('as the documented worker user: acl-worker ok, acl-cli warns what the CLI lacks, the fsync policy is unknown (CONFIG denied): exit 7', async () => {
    await s.admin.call('ACL', 'LOG', 'RESET');
    const report = await doctorJson(url(ACL_USER, 'pw'), ['--prefix', prefix]);
    expect(statuses(report)).toMatchObject({
      version: 'ok',
      eviction: 'ok',
      persistence: 'unknown',
      'acl-worker': 'ok',
      'acl-cli': 'warn',
      scripts: 'ok',
      prefixes: 'warn',
    });
    expect(verdictsOf(report, 'acl-worker')[0].message).toBe(`user ${ACL_USER} may run everything a worker needs on ${prefix}:*`);
    expect(verdictsOf(report, 'acl-cli')[0]).toMatchObject({
      message: expect.stringMatching(new RegExp(`^user ${ACL_USER} may not run \\+scan \\+type .*\\+llen \\+xrange \\+xrevrange on ${prefix}:\\*`)),
      // Not a widening of the worker's user, whom SCAN would show every key name on the server.
      fix: `give the CLI a user of its own rather than widen ${ACL_USER}, a worker's (SCAN lists every key name on the server): ACL SETUSER fire-once-cli reset on >CHANGE-ME ~${prefix}:* &${prefix}:* ${Object.keys(
        CLI_NEEDS,
      )
        .map((m) => `+${m}`)
        .join(' ')} (docs/operating.md)`,
    });
    expect(verdictsOf(report, 'persistence')[0].message).toMatch(/^AOF is on; its fsync policy could not be read \(CONFIG GET appendfsync: NOPERM/);
    expect(report.exitCode).toBe(EXIT.unchecked);
    // Asking is not running: ACL LOG holds only the reads doctor itself sends (and the user may
    // not run), none of the commands it asked about.
    const denied = new Set(
      parseAclLog(await s.admin.call('ACL', 'LOG'))
        .filter((d) => d.username === ACL_USER)
        .map((d) => d.object),
    );
    const doctorsOwn = new Set(['ping', 'config|get', 'dbsize', 'scan', 'script|exists', 'acl|whoami']);
    expect([...denied].filter((o) => !doctorsOwn.has(o))).toEqual([]);
    expect(denied.has('config|get')).toBe(true);
  });

  it('as a worker user without +info: acl-worker fails (a worker would refuse to start), exit 1', async () => {
    await s.admin.call('ACL', 'SETUSER', 'no-info', ...aclRules(prefix, 'pw2').filter((r) => r !== '+info'));
    const report = await doctorJson(url('no-info', 'pw2'), ['--prefix', prefix]);
    expect(verdictsOf(report, 'acl-worker')[0]).toMatchObject({
      status: 'fail',
      message: `user no-info may not run +info on ${prefix}:*, which a worker needs: a worker as this user cannot guard (it refuses to start or fails closed)`,
      fix: `ACL SETUSER no-info +info (keys ~${prefix}:*, channels &${prefix}:*)`,
    });
    expect(report.exitCode).toBe(EXIT.atRisk);
  });

  it('as a user that may not EVAL: both ACL checks say so', async () => {
    await s.admin.call('ACL', 'SETUSER', 'no-eval', 'reset', 'on', '>pw3', `~${prefix}:*`, '+info', '+hget');
    const report = await doctorJson(url('no-eval', 'pw3'), ['--prefix', prefix]);
    expect(verdictsOf(report, 'acl-worker')[0]).toMatchObject({ status: 'fail', message: expect.stringContaining('may not run +eval') });
    expect(verdictsOf(report, 'acl-cli')[0]).toMatchObject({ status: 'warn', message: expect.stringContaining('may not run +eval') });
  });

  it('as admin with --acl-user: checks that user with ACL DRYRUN, and everything else fully (exit 0)', async () => {
    const ok = await doctorJson(s.server.url, ['--prefix', prefix, '--acl-user', ACL_USER]);
    expect(verdictsOf(ok, 'acl-worker')[0]).toMatchObject({ status: 'ok', message: `user ${ACL_USER} may run everything a worker needs on ${prefix}:*` });
    expect(verdictsOf(ok, 'acl-cli')[0].status).toBe('warn');
    expect(verdictsOf(ok, 'persistence')[0].status).toBe('ok');
    expect(ok.exitCode).toBe(EXIT.ok);
    expect(await s.admin.dbsize()).toBe(0); // nothing it asked about ran: no probe key, no log entry
    // The same user checked against another prefix: its key and channel patterns do not match.
    const other = await doctorJson(s.server.url, ['--prefix', 'other-app', '--acl-user', ACL_USER]);
    expect(verdictsOf(other, 'acl-worker')[0]).toMatchObject({
      status: 'fail',
      message: expect.stringMatching(/may not run \+evalsha \+eval \+get .* on other-app:\*/),
    });
  });

  it("--namespace probes that namespace's keys: docs/deployment.md's user per namespace passes there, and fails elsewhere with its patterns", async () => {
    const user = 'fire-once-tenant-b';
    const rules = documentedAclLine(user, 'deployment.md')
      .split(' ')
      .slice(3)
      .map((rule) => (rule === '>CHANGE-ME' ? '>pw-ns' : rule.replace(/^(%R~|~|&)fire-once:/, `$1${prefix}:`)));
    await s.admin.call('ACL', 'SETUSER', user, ...rules);
    const own = await doctorJson(s.server.url, ['--prefix', prefix, '--namespace', 'tenant-b', '--acl-user', user]);
    expect(verdictsOf(own, 'acl-worker')[0]).toMatchObject({
      status: 'ok',
      message: `user ${user} may run everything a worker needs on ${prefix}:* in namespace tenant-b`,
    });
    const other = await doctorJson(s.server.url, ['--prefix', prefix, '--namespace', 'tenant-c', '--acl-user', user]);
    expect(verdictsOf(other, 'acl-worker')[0]).toMatchObject({
      status: 'fail',
      fix: expect.stringMatching(
        new RegExp(`\\(keys ~${prefix}:v3:\\{tenant-c/\\* ~${prefix}:v3:tenant-c:\\*, channels &${prefix}:v3:\\{tenant-c/\\* &${prefix}:v3:tenant-c:\\*\\)$`),
      ),
    });
    // Without --namespace it probes the default namespace, which this user may not touch.
    expect(verdictsOf(await doctorJson(s.server.url, ['--prefix', prefix, '--acl-user', user]), 'acl-worker')[0].status).toBe('fail');
  });
});

// With a replica attached, a worker's guard (replicaSync 'auto', the default) sends WAIT after
// every acquire that took a lock: a user without +wait can take no lock at all.
describe('fire-once doctor and a worker user on a primary with a replica', () => {
  let primary: ServerWithAdmin;
  let replica: ServerWithAdmin;
  const prefix = 'acl-replica';

  beforeAll(async () => {
    primary = await serverWith(...SAFE_ARGS);
    replica = await serverWith(...SAFE_ARGS, '--replicaof', '127.0.0.1', String(primary.server.port));
    for (let i = 0; !/slave0:.*state=online/.test(await primary.admin.info('replication')); i++) {
      if (i > 200) throw new Error('the replica did not come online');
      await new Promise((r) => setTimeout(r, 50));
    }
  });
  afterAll(async () => {
    await replica?.stop();
    await primary?.stop();
  });

  /** One guarded dispatch as `user`: the counter is incremented only if the guard let it dispatch. */
  async function dispatchAs(user: string, password: string, scope: string): Promise<{ dispatches: number; error?: unknown }> {
    const redis = new Redis(urlOf(user, password), { maxRetriesPerRequest: 1 });
    let dispatches = 0;
    try {
      // With room for a loaded machine's replica to answer.
      const guard = new FireOnceGuard({ redis, keyPrefix: prefix, replicaSync: { replicas: 'auto', timeoutMs: 4_000 } });
      const outcome = await guard.acquire({ scope, step: 'send', jobType: 'send' });
      if (outcome.kind === 'acquired') {
        dispatches += 1;
        await guard.commit(outcome.lease, Buffer.from('"sent"'));
      }
      return { dispatches };
    } catch (error) {
      return { dispatches, error };
    } finally {
      redis.disconnect();
    }
  }

  it('the documented worker user cannot take a lock, and doctor fails acl-worker naming +wait; with +wait both pass', async () => {
    await primary.admin.call('ACL', 'SETUSER', ACL_USER, ...aclRules(prefix, 'pw'));
    const denied = await dispatchAs(ACL_USER, 'pw', 'without-wait');
    expect(denied.dispatches).toBe(0);
    expect(denied.error).toBeInstanceOf(FireOnceStoreUnavailable);
    expect((denied.error as Error).message).toMatch(/NOPERM .*'wait'/);

    const report = await doctorJson(urlOf(ACL_USER, 'pw'), ['--prefix', prefix]);
    expect(verdictsOf(report, 'acl-worker')[0]).toMatchObject({
      status: 'fail',
      message: expect.stringMatching(/^user fire-once-worker may not run \+wait on acl-replica:\*, which a worker needs: .*the primary has 1 replica/),
      fix: `ACL SETUSER ${ACL_USER} +wait (keys ~${prefix}:*, channels &${prefix}:*)`,
    });
    expect(report.exitCode).toBe(EXIT.atRisk);

    await primary.admin.call('ACL', 'SETUSER', ACL_USER, '+wait');
    expect(verdictsOf(await doctorJson(urlOf(ACL_USER, 'pw'), ['--prefix', prefix]), 'acl-worker')[0].status).toBe('ok');
    expect(await dispatchAs(ACL_USER, 'pw', 'with-wait')).toEqual({ dispatches: 1 });
  });

  function urlOf(user: string, password: string): string {
    const url = new URL(primary.server.url);
    url.username = user;
    url.password = password;
    return url.toString();
  }
});
