import type { Redis } from 'ioredis';
import { DEFAULT_NAMESPACE, encodeId, type FireOnceKeys } from '../../core/keys';
import { replyErrorMessage } from '../../core/deployment/settings';
import { compareVersions } from '../../core/deployment/version';
import type { DoctorNode } from './topology';
import { verdict, type CheckName, type Status, type Verdict } from './verdict';

/** Keys and channels in the shapes the guard uses, under the checked prefix. */
interface Probe {
  readonly key: string;
  readonly channel: string;
  readonly log: string;
}

type Need = (probe: Probe) => string[];

/**
 * What a worker sends, as docs/reliability.md's least-privilege ACL line grants it (a test keeps the
 * two the same): the scripts' commands, the dispatch log, the wake-up subscriber, and INFO for
 * the start check.
 */
export const WORKER_NEEDS: Readonly<Record<string, Need>> = {
  evalsha: (p) => ['EVALSHA', '0'.repeat(40), '1', p.key],
  eval: (p) => ['EVAL', 'return 1', '1', p.key],
  get: (p) => ['GET', p.key],
  set: (p) => ['SET', p.key, 'v'],
  del: (p) => ['DEL', p.key],
  exists: (p) => ['EXISTS', p.key],
  pttl: (p) => ['PTTL', p.key],
  pexpire: (p) => ['PEXPIRE', p.key, '1000'],
  time: () => ['TIME'],
  lrange: (p) => ['LRANGE', p.key, '0', '-1'],
  rpush: (p) => ['RPUSH', p.key, 'x'],
  publish: (p) => ['PUBLISH', p.channel, 'x'],
  xadd: (p) => ['XADD', p.log, '*', 'f', 'v'],
  subscribe: (p) => ['SUBSCRIBE', p.channel],
  unsubscribe: (p) => ['UNSUBSCRIBE', p.channel],
  info: () => ['INFO', 'memory'],
};

/**
 * What a worker sends on top of {@link WORKER_NEEDS} to a primary that has replicas: `replicaSync`
 * (`'auto'`, the default) pipelines `WAIT` behind every write, and after every acquire that took a
 * lock. Without it no lock can be taken: the acquire is undone and fails closed.
 */
const REPLICA_NEEDS: Readonly<Record<string, Need>> = {
  wait: () => ['WAIT', '0', '0'],
};

/**
 * What a worker's client sends on top of {@link WORKER_NEEDS} to a Redis Cluster node, as
 * docs/reliability.md's Cluster line grants it: the slot map (both clients), ioredis's ready check,
 * redis-py's command table, and `ASKING` after an `ASK` while a slot migrates (without it every
 * call that meets one fails until the migration ends).
 */
export const CLUSTER_NEEDS: Readonly<Record<string, Need>> = {
  'cluster|slots': () => ['CLUSTER', 'SLOTS'],
  'cluster|info': () => ['CLUSTER', 'INFO'],
  command: () => ['COMMAND'],
  asking: () => ['ASKING'],
};

/**
 * What the `fire-once` commands send (report, inspect, release, invalidate, and migrate, which
 * reads 0.1's hashes), on top of connecting: docs/operating.md's CLI grant lists these, no more (a
 * test keeps the two the same). On a Cluster node, {@link CLUSTER_CLI_NEEDS} too.
 */
export const CLI_NEEDS: Readonly<Record<string, Need>> = {
  info: () => ['INFO', 'memory'],
  time: () => ['TIME'],
  evalsha: (p) => ['EVALSHA', '0'.repeat(40), '1', p.log],
  eval: (p) => ['EVAL', 'return 1', '1', p.log],
  scan: () => ['SCAN', '0'],
  type: (p) => ['TYPE', p.key],
  pttl: (p) => ['PTTL', p.key],
  exists: (p) => ['EXISTS', p.key],
  get: (p) => ['GET', p.key],
  set: (p) => ['SET', p.key, 'v'],
  hget: (p) => ['HGET', p.key, 'p'],
  hmget: (p) => ['HMGET', p.key, 'p'],
  strlen: (p) => ['STRLEN', p.key],
  llen: (p) => ['LLEN', p.key],
  del: (p) => ['DEL', p.key],
  xrange: (p) => ['XRANGE', p.log, '-', '+', 'COUNT', '1'],
  xrevrange: (p) => ['XREVRANGE', p.log, '+', '-', 'COUNT', '1'],
  xadd: (p) => ['XADD', p.log, '*', 'f', 'v'],
  publish: (p) => ['PUBLISH', p.channel, 'x'],
};

/** What the CLI's ioredis `Cluster` sends on top of {@link CLI_NEEDS}: the slot map and its ready check. */
const CLUSTER_CLI_NEEDS: Readonly<Record<string, Need>> = {
  'cluster|slots': CLUSTER_NEEDS['cluster|slots'],
  'cluster|info': CLUSTER_NEEDS['cluster|info'],
};

// Asks the server, as the calling user, whether each command (with its keys and channels) would
// be allowed, without running any of them (redis.acl_check_cmd, Redis 7.0).
const CHECK_SCRIPT = `
local out = {}
for i, command in ipairs(cjson.decode(ARGV[1])) do
  local ok, allowed = pcall(redis.acl_check_cmd, unpack(command))
  if not ok then out[i] = 'error: ' .. tostring(allowed) elseif allowed then out[i] = 1 else out[i] = 0 end
end
return out
`;

/**
 * Whether the user the doctor is connected as (or `aclUser`, through `ACL DRYRUN` on an admin
 * connection) may run what a worker and what the CLI need, on keys and channels of `keys`' prefix
 * and namespace (a user confined to one namespace passes only with that namespace's keys).
 * A worker lacking any of it cannot guard (`fail`); the CLI lacking some is a `warn`.
 */
export async function checkAcl(node: DoctorNode, keys: FireOnceKeys, aclUser: string | undefined): Promise<Verdict[]> {
  const { prefix } = keys;
  const where = keys.namespace === DEFAULT_NAMESPACE ? `${prefix}:*` : `${prefix}:* in namespace ${keys.namespace}`;
  // The patterns of docs/deployment.md's user per namespace: its scopes' keys, and its log and channels.
  const nsKeys = [keys.namespacePattern(), `${keys.root}${encodeId('namespace', keys.namespace)}:*`];
  const patterns =
    keys.namespace === DEFAULT_NAMESPACE
      ? `keys ~${prefix}:*, channels &${prefix}:*`
      : `keys ${nsKeys.map((p) => `~${p}`).join(' ')}, channels ${nsKeys.map((p) => `&${p}`).join(' ')}`;
  const probe = { key: keys.lock('doctor-probe', 'probe'), channel: keys.wakeChannel('doctor-probe'), log: keys.log() };
  const user = aclUser ?? (await whoAmI(node.client));
  const older = beforeRedis7(node, user, aclUser);
  if (older !== undefined) return older;
  const at = { node: node.address };
  const replicas = Number(node.info.get('connected_slaves') ?? 0);
  const cluster = node.info.get('cluster_enabled') === '1';
  const workerNeeds = { ...WORKER_NEEDS, ...(replicas > 0 ? REPLICA_NEEDS : {}), ...(cluster ? CLUSTER_NEEDS : {}) };
  // The verdict on `who` (a worker, the CLI): `missingStatus` when the user lacks any of its `needs`.
  // `ownUser`: what is missing goes to a user of its own, not to this one (a worker's).
  const verdictOf = async (check: CheckName, needs: Readonly<Record<string, Need>>, missingStatus: Status, who: string, ownUser = false): Promise<Verdict> => {
    const names = Object.keys(needs);
    const allowed = await permitted(
      node.client,
      names.map((name) => needs[name](probe)),
      aclUser,
    );
    if (typeof allowed === 'string' && aclUser === undefined && /^NOPERM/.test(allowed)) {
      // The check itself is a script: a user that may not EVAL cannot run the guard's scripts either.
      return verdict(check, missingStatus, `user ${user} may not run +eval, which ${who} needs (the rest could not be checked without it)`, {
        ...at,
        fix: `ACL SETUSER ${user} +eval +evalsha, then run doctor again`,
      });
    }
    if (typeof allowed === 'string') return verdict(check, 'unknown', `the permissions of user ${user} could not be checked (${allowed})`, at);
    const missing = names.filter((_, i) => !allowed[i]);
    if (missing.length === 0) return verdict(check, 'ok', `user ${user} may run everything ${who} needs on ${where}`, at);
    const waitNote = missing.includes('wait') ? `; +wait because the primary has ${replicas} replica(s), which replicaSync waits for` : '';
    const clusterNote = missing.some((m) => m in CLUSTER_NEEDS) ? '; the Cluster commands because this node is part of a Redis Cluster' : '';
    const consequence =
      check === 'acl-worker'
        ? `a worker as this user cannot guard (it refuses to start or fails closed)${waitNote}${clusterNote}`
        : 'these commands will fail with NOPERM';
    const grants = missing.map((m) => `+${m}`).join(' ');
    const fix = ownUser
      ? `give the CLI a user of its own rather than widen ${user}, a worker's (SCAN lists every key name on the server): ACL SETUSER fire-once-cli reset on >CHANGE-ME ~${prefix}:* &${prefix}:* ${names.map((m) => `+${m}`).join(' ')}${cluster ? ', on every node' : ''} (docs/operating.md)`
      : `ACL SETUSER ${user} ${grants} (${patterns})`;
    return verdict(check, missingStatus, `user ${user} may not run ${grants} on ${where}, which ${who} needs: ${consequence}`, { ...at, fix });
  };
  const worker = await verdictOf('acl-worker', workerNeeds, 'fail', 'a worker');
  const cliNeeds = { ...CLI_NEEDS, ...(cluster ? CLUSTER_CLI_NEEDS : {}) };
  return [worker, await verdictOf('acl-cli', cliNeeds, 'warn', 'the fire-once CLI', worker.status === 'ok')];
}

/**
 * The ACL verdicts of a server older than 7.0, which has neither `redis.acl_check_cmd` nor `ACL
 * DRYRUN`: 6.x has users whose permissions cannot be asked about without running the commands;
 * 5.x has no ACL, so every client may run every command (and no `--acl-user` can exist there).
 * `undefined` on 7.0 and later, or when the version could not be read.
 */
function beforeRedis7(node: DoctorNode, user: string, aclUser: string | undefined): Verdict[] | undefined {
  const version = node.info.get('redis_version');
  if (version === undefined || compareVersions(version, '7.0.0') >= 0) return undefined;
  const at = { node: node.address };
  const checks = [
    ['acl-worker', 'a worker'],
    ['acl-cli', 'the fire-once CLI'],
  ] as const;
  const hasUsers = compareVersions(version, '6.0.0') >= 0;
  if (!hasUsers && aclUser === undefined) {
    const message = (who: string) => `Redis ${version} has no ACL: every client may run every command ${who} needs (unless redis.conf renames one)`;
    return checks.map(([check, who]) => verdict(check, 'ok', message(who), at));
  }
  const why = hasUsers
    ? `that needs Redis 7.0 (redis.acl_check_cmd, ACL DRYRUN), and this is ${version}`
    : `Redis ${version} has no ACL users (they came with 6.0)`;
  const fix = hasUsers
    ? {
        fix: `compare ACL GETUSER ${user} with docs/reliability.md's least-privilege line (with +wait if the primary has replicas, and its Cluster line on a Cluster)`,
      }
    : {};
  return checks.map(([check]) => verdict(check, 'unknown', `the permissions of user ${user} could not be checked: ${why}`, { ...at, ...fix }));
}

/** One boolean per command, or why the permissions could not be checked. */
async function permitted(client: Redis, commands: string[][], aclUser: string | undefined): Promise<boolean[] | string> {
  try {
    if (aclUser !== undefined) {
      const replies = await Promise.all(commands.map((c) => client.call('ACL', 'DRYRUN', aclUser, ...c)));
      return replies.map((r) => String(r) === 'OK');
    }
    const replies = (await client.eval(CHECK_SCRIPT, 0, JSON.stringify(commands))) as (number | string)[];
    const failed = replies.find((r) => typeof r === 'string');
    if (failed !== undefined) return String(failed);
    return replies.map((r) => r === 1);
  } catch (err) {
    const message = replyErrorMessage(err);
    if (/acl_check_cmd|unknown subcommand/i.test(message)) return `needs Redis 7.0 or later: ${message}`;
    return message;
  }
}

async function whoAmI(client: Redis): Promise<string> {
  try {
    return String(await client.call('ACL', 'WHOAMI'));
  } catch {
    return client.options.username ?? 'default';
  }
}
