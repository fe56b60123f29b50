/**
 * The oldest Redis the library runs on, and why. Every command and option the guard, its scripts
 * and the CLI send is as old as this or older:
 *
 * - 5.0: streams (`XADD ... MAXLEN ~` for the dispatch log; `XRANGE`/`XREVRANGE` in the CLI), and
 *   scripts replicated by their effects by default, which a script needs before it may write
 *   after a non-deterministic command such as `TIME` (3.2 and 4.x refuse that unless the script
 *   calls `redis.replicate_commands()`).
 * - older: `PEXPIRE`/`PTTL` and `SET ... NX PX` (2.6.12),
 *   `EVALSHA` (2.6), `SCAN` (2.8).
 *
 * Newer servers add what some deployments use, not what the guard needs: ACL users and TLS
 * (6.0). `fire-once doctor` checks ACL permissions with `ACL DRYRUN` or `redis.acl_check_cmd`,
 * which need 7.0. The test suites run on the redis-server they find (7.0.15 where this was
 * written); `npm run test:redis5` runs the core, the scripts, the interceptor and the CLI on
 * Redis 5.0 (docs/production-redis.md, "Server version").
 */
export const MIN_REDIS_VERSION = '5.0.0';

/** `-1`, `0` or `1` as `a` is older than, the same as, or newer than `b` (dotted numbers). */
export function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map((n) => Number.parseInt(n, 10) || 0);
  const pb = b.split('.').map((n) => Number.parseInt(n, 10) || 0);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return Math.sign(d);
  }
  return 0;
}
