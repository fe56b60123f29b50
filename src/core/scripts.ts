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
type Invoke = (...keysAndArgs: ScriptArg[]) => Promise<unknown>;

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
  /** Run it: string replies decode as UTF-8 unless `buffers` is set. */
  (redis: RedisClient, keys: readonly string[], args: Args, buffers?: boolean): Promise<Result>;
}

/**
 * Define the script in `<dir>/<file>` under the versioned command `name`. `dir` defaults to this
 * module's `scripts/`; the CLI keeps its own scripts in `src/cli/scripts`.
 */
export function defineScript<Args extends readonly ScriptArg[], Result>(file: string, name: string, numberOfKeys: number, dir = join(__dirname, 'scripts')) {
  const lua = readFileSync(join(dir, file), 'utf8');
  const run = (redis: RedisClient, keys: readonly string[], args: Args, buffers = false): Promise<Result> => {
    const client = redis as unknown as Record<string, Invoke | undefined>;
    if (typeof client[name] !== 'function') redis.defineCommand(name, { lua, numberOfKeys });
    const invoke = client[buffers ? `${name}Buffer` : name] as Invoke;
    return invoke.call(redis, ...keys, ...args) as Promise<Result>;
  };
  return Object.assign(run, { lua, command: name }) as LuaScript<Args, Result>;
}

/** Raw reply of acquire.lua: see the script's header. */
export type AcquireReply =
  | [1, Buffer | string, number]
  | [2, number]
  | [3, number, Buffer | string, number]
  | [4, Buffer | string, Buffer | string]
  | [5, Buffer | string];

/** Fast-forward, acquire, report the holder, or report a payload conflict, in one round trip. */
export const acquireScript = defineScript<
  [token: string, lockTtlMs: number, mode: 'result' | 'exists', holder: string, argsHash: string, fenceTtlMs: number],
  AcquireReply
>('acquire.lua', 'fireOnceAcquireV2', 3);

/** Write the artifact on success and wake waiters; 1 if the lock was still ours, else 0. */
export const commitScript = defineScript<
  [token: string, artifact: Buffer, artifactTtlMs: number, argsHash: string, channel: string],
  0 | 1
>('commit.lua', 'fireOnceCommitV2', 2);

/** Compare-and-delete the lock on failure and wake waiters; 1 if deleted, 0 if refused. */
export const releaseScript = defineScript<[token: string, channel: string], 0 | 1>('release.lua', 'fireOnceReleaseV2', 1);

/** Compare-and-expire the lock (lease renewal, hold after success); 1 if ours, 0 if lost. */
export const extendScript = defineScript<[token: string, lockTtlMs: number, fenceTtlMs: number], 0 | 1>(
  'extend.lua',
  'fireOnceExtendV2',
  2,
);

/** Delete an artifact and publish its key to every worker's cache; 1 if it existed, else 0. */
export const invalidateScript = defineScript<[channel: string], 0 | 1>('invalidate.lua', 'fireOnceInvalidateV2', 1);
