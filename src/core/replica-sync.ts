import { createHash } from 'node:crypto';
import { primariesOf } from './deployment/nodes';
import type { ReplicaSyncSetting } from './options';
import type { LuaScript, RedisClient } from './scripts';

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

/**
 * Runs the guard's write scripts with `WAIT <replicas> <timeout>` pipelined behind them on the
 * same connection (on a Cluster, to the script's own master), so a write the replicas keep up
 * with costs no extra round trip. Without replicas to wait for, the script runs alone. The
 * acquire, whose hot path (a fast-forward) writes nothing, waits only after it wrote: see
 * {@link ReplicaSync.confirm}.
 */
const RECOUNT_EVERY_MS = 60_000;

export class ReplicaSync {
  /** The last count, once known: read synchronously, so a guard without replicas adds no await. */
  private known: number | undefined;
  private counting: Promise<number> | undefined;
  private countedAt = 0;
  /** Scripts this guard has sent whole, by SHA1: Redis has them cached until a restart or a SCRIPT FLUSH. */
  private readonly loaded = new Set<string>();

  constructor(
    private readonly redis: RedisClient,
    readonly setting: ReplicaSyncSetting,
  ) {}

  write<A extends readonly (string | number | Buffer)[], R>(script: LuaScript<A, R>, keys: readonly string[], args: A, buffers = false): Promise<Written<R>> {
    const wanted = this.wanted();
    if (wanted === 0) return script(this.redis, keys, args, buffers).then((reply) => ({ reply, wanted, acked: 0 }));
    return Promise.resolve(wanted).then(async (count) => {
      if (count === 0) return { reply: await script(this.redis, keys, args, buffers), wanted: count, acked: 0 };
      // EVALSHA, and EVAL again with its own WAIT if Redis lost the script (SCRIPT FLUSH). Not the
      // script's ioredis command: on NOSCRIPT it sends the script again after the pipeline, so the
      // WAIT ran before the write it was meant to wait for, and counted replicas that never had it.
      // The first time, EVAL: Redis caches the script, and later writes name it by its SHA1.
      const sha = shaOf(script.lua);
      let replies = this.loaded.has(sha) ? await this.pipelined(count, buffers, ['evalsha', sha], script.numberOfKeys, keys, args) : undefined;
      if (replies === undefined || isNoScript(replies[0][0])) {
        replies = await this.pipelined(count, buffers, ['eval', script.lua], script.numberOfKeys, keys, args);
        if (replies[0][0] === null) this.loaded.add(sha);
      }
      const [[scriptErr, reply], [waitErr, acked]] = replies as [[Error | null, R], [Error | null, number]];
      if (scriptErr) throw scriptErr;
      // The script ran: its reply stands (a commit wrote, a release deleted, waiters were taken).
      if (waitErr) return { reply, wanted: count, acked: 0, waitError: waitErr };
      return { reply, wanted: count, acked };
    });
  }

  /** `EVALSHA` or `EVAL` of a script, with `WAIT` behind it, in one pipeline. */
  private async pipelined(
    count: number,
    buffers: boolean,
    [command, body]: ['evalsha' | 'eval', string],
    numberOfKeys: number,
    keys: readonly string[],
    args: readonly (string | number | Buffer)[],
  ): Promise<[Error | null, unknown][]> {
    const pipeline = this.redis.pipeline() as unknown as Record<string, (...args: unknown[]) => unknown> & ReturnType<RedisClient['pipeline']>;
    pipeline[buffers ? `${command}Buffer` : command](body, numberOfKeys, ...keys, ...args);
    pipeline.wait(count, this.setting.timeoutMs);
    return (await pipeline.exec()) as [Error | null, unknown][];
  }

  /**
   * After a script that wrote `key`, wait for the replicas on the connection that sent it: `WAIT`
   * has no key, so a `PTTL` of `key` routes the pipeline to its master on a Cluster. Resolves how
   * many replicas were wanted and how many acknowledged; `undefined` without replicas to wait for.
   */
  confirm(key: string): Promise<{ wanted: number; acked: number }> | undefined {
    const wanted = this.wanted();
    if (wanted === 0) return undefined;
    return Promise.resolve(wanted).then(async (count) => {
      if (count === 0) return { wanted: count, acked: 0 };
      const replies = (await this.redis.pipeline().pttl(key).wait(count, this.setting.timeoutMs).exec()) as [Error | null, number][];
      const [, [err, acked]] = replies;
      if (err) throw err;
      return { wanted: count, acked };
    });
  }

  /** How many replicas a write must reach now: a number once counted, a promise while counting. */
  private wanted(): Promise<number> | number {
    const { replicas } = this.setting;
    if (replicas !== 'auto') return replicas;
    if (this.counting === undefined || Date.now() - this.countedAt > RECOUNT_EVERY_MS) {
      this.countedAt = Date.now();
      // A failed count keeps the previous one (none at first): INFO denied or the node away.
      this.counting = countReplicas(this.redis).then(
        (count) => (this.known = count),
        () => this.known ?? 0,
      );
    }
    return this.known ?? this.counting;
  }
}

/**
 * The replicas streaming from the primary (`state=online` in `INFO replication`), or the fewest
 * any Cluster master has. A replica still in its first sync cannot acknowledge anything yet.
 */
export async function countReplicas(redis: RedisClient): Promise<number> {
  const counts = await Promise.all(
    (await primariesOf(redis)).map(async ({ client }) => (await client.info('replication')).match(/^slave\d+:.*state=online/gm)?.length ?? 0),
  );
  return Math.min(...counts);
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

function isNoScript(err: Error | null): boolean {
  return err !== null && /^NOSCRIPT\b/.test(err.message);
}
