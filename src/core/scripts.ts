import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Cluster, Redis } from 'ioredis';

/** The Redis clients the guard accepts. The caller owns the client; the guard never closes it. */
export type RedisClient = Redis | Cluster;

/** An ioredis `Cluster` rather than a single connection. */
export function isCluster(redis: RedisClient): redis is Cluster {
  return (redis as { isCluster?: boolean }).isCluster === true;
}

type ScriptArg = string | number | Buffer;

/** Sockets corked until the next tick by {@link coalesceWrites}. */
const corked = new WeakSet<object>();

/**
 * Cork the connection's socket until the next tick, so that every command written in this tick,
 * by this guard or anyone sharing the client, leaves in one system call (`writev`) instead of one
 * `write` each. The bytes, their order and the replies are the same; under load many calls settle
 * in the same tick (Redis answers a batch of commands in one read) and their next commands go out
 * together, which is most of the guard's throughput at 64 in flight (bench/RESULTS.md, issue 11).
 * Only a connection with replies outstanding is corked: with none, the calls are one at a time,
 * and holding the write until the next tick added about 12 us to each. A Cluster, or a client that
 * is not connected, is left alone.
 */
export function coalesceWrites(redis: RedisClient): void {
  if (isCluster(redis) || redis.status !== 'ready' || redis.commandQueue.length === 0) return;
  const { stream } = redis;
  if (corked.has(stream) || typeof stream.cork !== 'function') return;
  corked.add(stream);
  stream.cork();
  process.nextTick(uncork, stream);
}

function uncork(stream: Redis['stream']): void {
  corked.delete(stream);
  stream.uncork();
}

type Invoke = (...keysAndArgs: ScriptArg[]) => Promise<unknown>;

/**
 * The folder the guard's Lua scripts live in; PROTOCOL.md names them, and packages copy them.
 *
 * @example
 * ```ts
 * import { readdirSync } from 'node:fs';
 * import { SCRIPTS_DIR } from 'temporal-fire-once/core';
 * readdirSync(SCRIPTS_DIR).includes('acquire.lua'); // true
 * ```
 */
export const SCRIPTS_DIR = join(__dirname, 'scripts');

/**
 * A typed Lua script, registered once per client through `defineCommand` under a versioned name
 * so that two library versions on one client never call each other's script. ioredis runs it with
 * EVALSHA and falls back to EVAL after a `SCRIPT FLUSH`.
 */
export interface LuaScript<Args extends readonly ScriptArg[], Result> {
  /** The versioned command name it is registered under. */
  readonly command: string;
  /** The script's source, header included. */
  readonly lua: string;
  /** How many of its arguments are keys. */
  readonly numberOfKeys: number;
  /** Run it: string replies decode as UTF-8 unless `buffers` is set. */
  (redis: RedisClient, keys: readonly string[], args: Args, buffers?: boolean): Promise<Result>;
  /** The client (and pipeline) method that runs it, defined on `redis` first if it is not yet. */
  method(redis: RedisClient, buffers?: boolean): string;
}

/**
 * Define the script in `<dir>/<file>` under the versioned command `name`. `dir` defaults to this
 * module's `scripts/`; the CLI keeps its own scripts in `src/cli/scripts`.
 */
export function defineScript<Args extends readonly ScriptArg[], Result>(file: string, name: string, numberOfKeys: number, dir = SCRIPTS_DIR) {
  const lua = readFileSync(join(dir, file), 'utf8');
  const bufferName = `${name}Buffer`;
  const method = (redis: RedisClient, buffers = false): string => {
    if (typeof (redis as unknown as Record<string, unknown>)[name] !== 'function') redis.defineCommand(name, { lua, numberOfKeys });
    return buffers ? bufferName : name;
  };
  const run = (redis: RedisClient, keys: readonly string[], args: Args, buffers = false): Promise<Result> => {
    const invoke = (redis as unknown as Record<string, Invoke>)[method(redis, buffers)];
    coalesceWrites(redis);
    return invoke.call(redis, ...keys, ...args) as Promise<Result>;
  };
  return Object.assign(run, { lua, command: name, numberOfKeys, method }) as LuaScript<Args, Result>;
}

/**
 * The coded replies of acquire.lua (see its header). The two hot replies carry no code: a bulk
 * string is a fast-forward to the artifact record, an integer is an acquire and its fencing token.
 *
 * @example
 * ```ts
 * import { ACQUIRE_REPLY } from 'temporal-fire-once/core';
 * ACQUIRE_REPLY.HELD; // 3: {3, pttl, lock record}
 * ```
 */
export const ACQUIRE_REPLY = Object.freeze({ EXISTS: 1, HELD: 3, CORRUPT: 5 } as const);

/** Raw reply of acquire.lua, read with buffers. */
export type AcquireReply =
  | Buffer
  | number
  | [Buffer, number]
  | [typeof ACQUIRE_REPLY.EXISTS, number]
  | [typeof ACQUIRE_REPLY.HELD, number, Buffer]
  | [typeof ACQUIRE_REPLY.CORRUPT, Buffer];

/** Fast-forward, acquire or report the holder, in one round trip. */
export const acquireScript = defineScript<[token: string, lockTtlMs: number, mode: 'r' | 't' | 'x', lockTail: string], AcquireReply>(
  'acquire.lua',
  'fireOnceAcquireV3',
  2,
);

/** Reply of commit.lua, release.lua and extend.lua: whether the lock was ours, then the entries of any waiters parked on it. */
export type SettleReply = 0 | 1 | [0 | 1, ...Buffer[]];

/**
 * Reply of commit.lua when it refused to write: a late holder's commit while another holder's
 * lock, or another result, stands. Nothing is changed then.
 *
 * @example
 * ```ts
 * import { COMMIT_REFUSED } from 'temporal-fire-once/core';
 * COMMIT_REFUSED; // 2
 * ```
 */
export const COMMIT_REFUSED = 2;

/** Write the artifact, delete the lock if still ours, wake and hand over parked waiters; or refuse (a late holder). */
export const commitScript = defineScript<
  [token: string, artifact: Buffer | string, artifactTtlMs: number, channel: string],
  SettleReply | typeof COMMIT_REFUSED
>('commit.lua', 'fireOnceCommitV3', 3);

/** Compare-and-delete the lock on failure, wake and hand over parked waiters; 0 if refused. */
export const releaseScript = defineScript<[token: string, channel: string], SettleReply>('release.lua', 'fireOnceReleaseV3', 2);

/**
 * Compare-and-expire the lock (lease renewal, hold after the dispatch); 1 if ours, 0 if lost.
 * With `'take'`, the parked waiters are handed over as by a commit, and `''` for the TTL leaves it.
 */
export const extendScript = defineScript<[token: string, lockTtlMs: number | '', waitersTtlMs: number, take: '' | 'take'], SettleReply>(
  'extend.lua',
  'fireOnceExtendV3',
  2,
);

/** Delete an artifact and publish its key to every worker's cache; 1 if it existed, else 0. */
export const invalidateScript = defineScript<[channel: string], 0 | 1>('invalidate.lua', 'fireOnceInvalidateV3', 1);

/**
 * The coded replies of park.lua (see its header). A bulk string is a fast-forward to the artifact
 * record, as with acquire.lua; `0` means no lock stands any more.
 *
 * @example
 * ```ts
 * import { PARK_REPLY } from 'temporal-fire-once/core';
 * PARK_REPLY.PARKED; // 2: {2, pttl, lock record}
 * ```
 */
export const PARK_REPLY = Object.freeze({ FREE: 0, EXISTS: 1, PARKED: 2, CORRUPT: 5 } as const);

/** Raw reply of park.lua, read with buffers. */
export type ParkReply =
  Buffer | typeof PARK_REPLY.FREE | [typeof PARK_REPLY.EXISTS, number] | [typeof PARK_REPLY.PARKED, number, Buffer] | [typeof PARK_REPLY.CORRUPT, Buffer];

/** Register a waiter's entry (its args hash and task token) on a held lock, re-checking the artifact and the lock in the same step. */
export const parkScript = defineScript<[mode: 'r' | 'x', entry: Buffer, graceMs: number], ParkReply>('park.lua', 'fireOnceParkV3', 3);

/**
 * The coded replies of reap.lua (see its header).
 *
 * @example
 * ```ts
 * import { REAP_REPLY } from 'temporal-fire-once/core';
 * REAP_REPLY.FREE; // 2: {2, waiter...}: the lock vanished; fail them so they retry
 * ```
 */
export const REAP_REPLY = Object.freeze({ HELD: 0, DONE: 1, FREE: 2, CORRUPT: 5 } as const);

/** Raw reply of reap.lua, read with buffers. */
export type ReapReply =
  typeof REAP_REPLY.HELD | [typeof REAP_REPLY.DONE, Buffer, ...Buffer[]] | [typeof REAP_REPLY.FREE, ...Buffer[]] | [typeof REAP_REPLY.CORRUPT, Buffer];

/** Hand over the parked waiters of a lock that ended without a commit or release handing them over. */
export const reapScript = defineScript<[mode: 'r' | 'x', graceMs: number], ReapReply>('reap.lua', 'fireOnceReapV3', 3);

/** Append a batch of dispatch-log entries (each a field count, then its fields) to one stream; resolves how many. */
export const logAppendScript = defineScript<(string | number)[], number>('log-append.lua', 'fireOnceLogAppendV3', 1);

/**
 * Every script of the protocol, for tests and tools that check them all.
 *
 * @example
 * ```ts
 * import { PROTOCOL_SCRIPTS } from 'temporal-fire-once/core';
 * PROTOCOL_SCRIPTS.map((s) => s.command); // ['fireOnceAcquireV3', 'fireOnceCommitV3', ...]
 * ```
 */
export const PROTOCOL_SCRIPTS = [acquireScript, parkScript, reapScript, commitScript, releaseScript, extendScript, invalidateScript, logAppendScript] as const;
