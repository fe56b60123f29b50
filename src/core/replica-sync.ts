import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { connectionTo, isConnectionClosed, redirectOf, throughMigration, tryAgainPace } from './cluster-redirect';
import { primariesOf } from './deployment/nodes';
import type { ReplicaSyncSetting } from './options';
import type { Redis } from 'ioredis';
import { extendScript, isCluster, type LuaScript, type RedisClient } from './scripts';

/** A script's reply, and how many replicas acknowledged it when the guard waited for them. */
export interface Written<R> {
  readonly reply: R;
  /** Replicas the write had to reach; 0 when the guard did not wait. */
  readonly wanted: number;
  /** Replicas that acknowledged it within the timeout (`WAIT`'s reply). */
  readonly acked: number;
  /** Why `WAIT` failed after the script ran (none acknowledged then), e.g. an ACL without it. */
  readonly waitError?: Error;
}

/** A lock just taken, as {@link ReplicaSync.confirm} re-arms it where a redirect points. */
export interface TakenLock {
  readonly lockKey: string;
  readonly waitersKey: string;
  readonly token: string;
  readonly lockTtlMs: number;
  readonly waitersTtlMs: number;
}

/** What {@link ReplicaSync.confirm} found: `lost` when the lock was gone where it re-armed it. */
export interface Confirmed {
  readonly wanted: number;
  readonly acked: number;
  readonly lost?: true;
}

/** The Redis Cluster hash slot of a key, by its `{hash tag}` if it has one: ioredis's own function, which ships no types. */
const calculateSlot = require('cluster-key-slot') as (key: string) => number; // eslint-disable-line @typescript-eslint/no-require-imports -- untyped CommonJS

const RECOUNT_EVERY_MS = 60_000;
/** How many `MOVED` or `ASK` replies a write follows on a Cluster, its `WAIT` with it. */
const REDIRECTS = 2;

type Arg = string | number | Buffer;
/** A script's reply and its `WAIT`'s, each with its error, as a pipeline resolves them. */
type Pair<R> = [[Error | null, R], [Error | null, number]];

/** One write and the replicas its `WAIT` asks for, as sent again after a redirect. */
interface OneWrite<A extends readonly Arg[], R> {
  readonly script: LuaScript<A, R>;
  readonly keys: readonly string[];
  readonly args: A;
  readonly buffers: boolean;
  readonly count: number;
}

/**
 * Runs the guard's write scripts with `WAIT <replicas> <timeout>` pipelined behind them on the
 * same connection (on a Cluster, to the script's own master), so a write the replicas keep up
 * with costs no extra round trip. Without replicas to wait for, the script runs alone. The
 * acquire, whose hot path (a fast-forward) writes nothing, waits only after it wrote: see
 * {@link ReplicaSync.confirm}.
 *
 * On a Cluster, a node that no longer serves the script's slot answers `MOVED` (or `ASK`, while
 * the slot migrates) and the script does not run, but the `WAIT` behind it does, there, counting
 * none of it; ioredis follows no redirect of a pipeline in which another command succeeded. So
 * the pair is sent again, together, on the connection to the node the reply names (`ASKING`
 * first for an `ASK`), at most {@link REDIRECTS} times; a write still redirected then fails, and
 * the guard reports it retryable. A `TRYAGAIN` (mid-migration, a script whose keys are split
 * between the two nodes, or missing where it was asked: a commit's artifact key, say) also comes
 * back in place, where ioredis would retry a lone command: the pair is sent again to the same node
 * after the client's `retryDelayOnTryAgain`, as often as its `maxRedirections` and
 * `storeTimeoutMs` allow, so that a job that ran keeps its result once the slot has moved.
 */
export class ReplicaSync {
  /** The last count, once known: read synchronously, so a guard without replicas adds no await. */
  private known: ReplicaCounts | undefined;
  private counting: Promise<ReplicaCounts> | undefined;
  private countedAt = 0;
  /** A count under way: a recount due meanwhile waits for it rather than send INFO to every master again. */
  private countInFlight = false;
  /** Scripts this guard has sent whole, by SHA1: Redis has them cached until a restart or a SCRIPT FLUSH. */
  private readonly loaded = new Set<string>();

  constructor(
    private readonly redis: RedisClient,
    readonly setting: ReplicaSyncSetting,
    /** What bounds each write and its `WAIT` together: retries of a `TRYAGAIN` end within it. */
    private readonly storeTimeoutMs: number,
  ) {}

  write<A extends readonly Arg[], R>(script: LuaScript<A, R>, keys: readonly string[], args: A, buffers = false): Promise<Written<R>> {
    const wanted = this.wanted(keys[0]);
    const alone = () => throughMigration(this.redis, this.storeTimeoutMs, () => script(this.redis, keys, args, buffers));
    if (wanted === 0) return alone().then((reply) => ({ reply, wanted, acked: 0 }));
    return Promise.resolve(wanted).then(async (count) => {
      if (count === 0) return { reply: await alone(), wanted: count, acked: 0 };
      const started = performance.now();
      let write: OneWrite<A, R> = { script, keys, args, buffers, count };
      let replies = await this.pair(this.redis, false, write);
      if (isDetour(replies[0][0])) [replies, write] = await this.follow(replies[0][0] as Error, started, write);
      const [[scriptErr, reply], [waitErr, acked]] = replies;
      if (scriptErr) throw scriptErr;
      // The script ran: its reply stands (a commit wrote, a release deleted, waiters were taken).
      if (waitErr) return { reply, wanted: write.count, acked: 0, waitError: waitErr };
      return { reply, wanted: write.count, acked };
    });
  }

  /**
   * After the acquire script took `lock`, wait for the replicas on the connection that sent it:
   * `WAIT` has no key, so a `PTTL` of the lock routes the pipeline to its master on a Cluster.
   * If that node redirects the `PTTL`, the lock is elsewhere now (its slot moved), written there
   * by a `MIGRATE` that this connection's `WAIT` would not count: the lock is re-armed where the
   * redirect points (compare-and-expire, the renewal's script) with the `WAIT` behind that.
   * Resolves how many replicas were wanted and how many acknowledged; `undefined` without
   * replicas to wait for.
   */
  confirm(lock: TakenLock): Promise<Confirmed> | undefined {
    const wanted = this.wanted(lock.lockKey);
    if (wanted === 0) return undefined;
    return Promise.resolve(wanted).then(async (count): Promise<Confirmed> => {
      if (count === 0) return { wanted: count, acked: 0 };
      const [[moved], [err, acked]] = (await this.redis.pipeline().pttl(lock.lockKey).wait(count, this.setting.timeoutMs).exec()) as Pair<number>;
      if (moved && redirectOf(moved)) {
        const args = [lock.token, lock.lockTtlMs, lock.waitersTtlMs, ''] as [string, number, number, ''];
        const [rearmed, sent] = await this.follow(moved, performance.now(), {
          script: extendScript,
          keys: [lock.lockKey, lock.waitersKey],
          args,
          buffers: false,
          count,
        });
        const [[rearmErr, reply], [waitErr, rearmAcked]] = rearmed;
        if (rearmErr ?? waitErr) throw rearmErr ?? waitErr;
        return reply === 1 ? { wanted: sent.count, acked: rearmAcked } : { wanted: sent.count, acked: 0, lost: true };
      }
      if (err) throw err;
      return { wanted: count, acked };
    });
  }

  /**
   * The script and its `WAIT` on `to`'s connection (`ASKING` first if `asking`), errors in place:
   * `EVALSHA`, and `EVAL` again with its own `WAIT` if Redis lost the script (SCRIPT FLUSH). Not
   * the script's ioredis command: on NOSCRIPT it sends the script again after the pipeline, so the
   * WAIT ran before the write it was meant to wait for, and counted replicas that never had it.
   * The first time, EVAL: Redis caches the script, and later writes name it by its SHA1.
   */
  private async pair<A extends readonly Arg[], R>(to: RedisClient, asking: boolean, write: OneWrite<A, R>): Promise<Pair<R>> {
    const { script, keys, args, buffers, count } = write;
    const sha = shaOf(script.lua);
    const send = async (command: 'evalsha' | 'eval', body: string) => {
      const pipeline = to.pipeline() as unknown as Record<string, (...args: unknown[]) => unknown> & ReturnType<RedisClient['pipeline']>;
      if (asking) pipeline.asking();
      pipeline[buffers ? `${command}Buffer` : command](body, script.numberOfKeys, ...keys, ...args);
      pipeline.wait(count, this.setting.timeoutMs);
      const replies = (await pipeline.exec()) as [Error | null, unknown][];
      return asking ? replies.slice(1) : replies;
    };
    let replies = this.loaded.has(sha) ? await send('evalsha', sha) : undefined;
    if (replies === undefined || isNoScript(replies[0][0])) {
      replies = await send('eval', script.lua);
      if (replies[0][0] === null) this.loaded.add(sha);
    }
    return replies as Pair<R>;
  }

  /**
   * Send the pair again after `detour`: where a `MOVED` or `ASK` points, at most {@link REDIRECTS}
   * times; to the same node after a `TRYAGAIN`, once the client's `retryDelayOnTryAgain` has
   * passed, at most its `maxRedirections` times and while the try can end within `storeTimeoutMs`
   * of `started` (its `WAIT` may take `timeoutMs`). A redirect to a node the client has no
   * connection to yet (one just added to the cluster, mid-migration), or a connection closed under
   * the pair, counts as such a try: the pair goes again to the slot's master by the client's map,
   * and once the slot has moved, the `MOVED` there has the client connect to its new master.
   * With `'auto'`, the `WAIT` sent to another master asks for that master's replicas. Resolves the
   * replies and the write as last sent (its `count` is the one the `WAIT` asked for).
   */
  private async follow<A extends readonly Arg[], R>(detour: Error, started: number, write: OneWrite<A, R>): Promise<[Pair<R>, OneWrite<A, R>]> {
    let [last, to, asking, redirects, tries]: [Error, RedisClient, boolean, number, number] = [detour, this.redis, false, 0, 0];
    while (isCluster(this.redis)) {
      const redirect = redirectOf(last);
      if (redirect?.kind === 'MOVED') this.redis.refreshSlotsCache(); // so that later calls go there first
      const node = redirect && connectionTo(this.redis, redirect.address);
      if (node) {
        if (redirects++ === REDIRECTS) break;
        [to, asking] = [node, redirect.kind === 'ASK'];
        // Another master: its own replicas are the ones to wait for.
        if (this.setting.replicas === 'auto' && this.known !== undefined) write = { ...write, count: this.countAt(this.known, nodeAddress(node)) };
      } else {
        const { delay, tries: maxTries } = tryAgainPace(this.redis);
        if (tries++ === maxTries || performance.now() - started + delay + this.setting.timeoutMs >= this.storeTimeoutMs) break;
        if (!isTryAgain(last)) {
          [to, asking, redirects] = [this.redis, false, 0];
          if (this.setting.replicas === 'auto' && this.known !== undefined) write = { ...write, count: this.countFor(this.known, write.keys[0]) };
        }
        await sleep(delay);
      }
      const replies = await this.pair(to, asking, write);
      if (!isDetour(replies[0][0])) return [replies, write];
      last = replies[0][0] as Error;
    }
    throw new Error(`the slot of ${write.keys[0]} is moving (${last.message}): the write did not run where its WAIT could count it`);
  }

  /**
   * How many replicas a write of `key` must reach now: a number once counted, a promise while
   * counting. With `'auto'`, the replicas of the master that serves `key`: on a Cluster each
   * master is counted on its own, so one without a replica (a failover's new master, until the old
   * one comes back) leaves the others waiting for theirs.
   */
  private wanted(key: string): Promise<number> | number {
    const { replicas } = this.setting;
    if (replicas !== 'auto') return replicas;
    if (this.counting === undefined || (!this.countInFlight && Date.now() - this.countedAt > RECOUNT_EVERY_MS)) {
      this.countedAt = Date.now();
      this.countInFlight = true;
      // A failed recount keeps the last count. A first count that fails (INFO denied, the node
      // away) fails the write closed, and the next write counts again: writing with no WAIT could
      // leave a lock or a result that replicas never got, for a failover to lose.
      this.counting = countReplicas(this.redis).then(
        (counts) => {
          this.countInFlight = false;
          return (this.known = counts);
        },
        (err: unknown) => {
          this.countInFlight = false;
          if (this.known !== undefined) return this.known;
          this.counting = undefined;
          throw new Error(uncounted((err as Error).message));
        },
      );
    }
    return this.known !== undefined ? this.countFor(this.known, key) : this.counting.then((counts) => this.countFor(counts, key));
  }

  /**
   * The replicas of the master that serves `key`, by the client's slot map. A master counted
   * under no address the map names (the map changed since): the most any master has, so that a
   * WAIT asks too much rather than too little (it then fails closed), and a recount at once.
   */
  private countFor(counts: ReplicaCounts, key: string): number {
    if (!isCluster(this.redis)) return counts.most;
    return this.countAt(counts, (this.redis.slots[calculateSlot(key)] as readonly string[] | undefined)?.[0]);
  }

  /** The replicas of the master at `address` (`host:port`); one not counted: the most any has, and a recount. */
  private countAt(counts: ReplicaCounts, address: string | undefined): number {
    const count = address === undefined ? undefined : counts.byMaster.get(address);
    if (count !== undefined) return count;
    this.countedAt = 0;
    return counts.most;
  }
}

/** A node's `host:port`, as the client's slot map and {@link ReplicaCounts} name it. */
function nodeAddress(node: Redis): string {
  return `${node.options.host}:${node.options.port}`;
}

/** The online replicas of each master, by its `host:port` as the client's slot map names it, and the most any has. */
interface ReplicaCounts {
  readonly byMaster: ReadonlyMap<string, number>;
  readonly most: number;
}

/** Why a write fails when `'auto'` could not count the replicas it must wait for. */
function uncounted(reason: string): string {
  return `replicaSync 'auto' could not count the primary's replicas with INFO replication (${reason}), so nothing was written that it could not wait for: grant the Redis user +info, or set replicaSync to { replicas: n } or false`;
}

/**
 * The replicas streaming from the primary, or from each Cluster master (`state=online` in `INFO
 * replication`). A replica still in its first sync cannot acknowledge anything yet.
 */
async function countReplicas(redis: RedisClient): Promise<ReplicaCounts> {
  const counts = await Promise.all(
    (await primariesOf(redis)).map(async ({ client }): Promise<[string, number]> => {
      const online = (await client.info('replication')).match(/^slave\d+:.*state=online/gm)?.length ?? 0;
      return [nodeAddress(client), online];
    }),
  );
  return { byMaster: new Map(counts), most: Math.max(...counts.map(([, online]) => online)) };
}

const shas = new Map<string, string>();

/** The SHA1 `EVALSHA` names a script by. */
function shaOf(lua: string): string {
  let sha = shas.get(lua);
  if (sha === undefined) {
    sha = createHash('sha1').update(lua).digest('hex');
    shas.set(lua, sha);
  }
  return sha;
}

/**
 * A reply that says the script did not run on a Cluster, and where or when to send it again; or
 * that the connection closed under it, as ioredis closes the one to a master its refreshed slot
 * map does not list yet (it may have run: the guard's writes compare their token, so a second
 * run changes nothing).
 */
function isDetour(err: Error | null): boolean {
  return err !== null && (redirectOf(err) !== undefined || isTryAgain(err) || isConnectionClosed(err));
}

function isTryAgain(err: Error | null): boolean {
  return err !== null && /^TRYAGAIN\b/.test(err.message);
}

function isNoScript(err: Error | null): boolean {
  return err !== null && /^NOSCRIPT\b/.test(err.message);
}
