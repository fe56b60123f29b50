import { decodeId, type FireOnceKeys } from '../core/keys';
import { claimProtocol } from '../core/protocol';
import { formatArtifact } from '../core/records';
import type { RedisClient } from '../core/scripts';
import { CliError, EXIT } from './exit-codes';
import { scanKeys } from './scan';

/** A key of the protocol v2 layout: `<prefix>:{<scope>}:<kind>:<id>`. */
interface V2Key {
  readonly key: string;
  readonly scope: string;
  readonly kind: 'artifact' | 'lock' | 'fence' | 'external';
  readonly id: string;
}

/** What `fire-once migrate` found and did. */
export interface MigrateResult {
  readonly prefix: string;
  readonly namespace: string;
  /** v2 artifacts copied into the v3 layout (already present in v3: left as they are, and counted here as `kept`). */
  readonly copied: number;
  readonly kept: number;
  /** v2 locks of dispatches still in flight (not committed): migrating waits for them. */
  readonly inFlight: readonly { readonly key: string; readonly ttlMs: number }[];
  /** v2 keys deleted after the copy (`--delete`). */
  readonly deleted: number;
  readonly done: boolean;
}

const V2_KEY = /^\{([^{}]+)\}:(artifact|lock|fence|external):([^:]+)$/;

/**
 * Move a key prefix from protocol v2 to v3. v3 reads nothing of v2, so every v2 result artifact
 * (a hash `{p, h}`) is copied into the v3 layout of `keys.namespace`, with the TTL it has left,
 * unless v3 already holds one; then the prefix's protocol marker is set to 3. It refuses while a v2
 * dispatch is in flight (a v2 lock not marked committed): stop the v2 workers first and let their
 * locks run out. With `remove`, the v2 keys (artifacts, locks, fencing counters) are deleted after
 * the copy; suggested external keys are the job's own and are never touched.
 */
export async function migrate(redis: RedisClient, keys: FireOnceKeys, remove: boolean): Promise<MigrateResult> {
  const found = (await scanKeys(redis, `${keys.prefix}:{*`)).map((key) => v2Key(keys.prefix, key)).filter((k): k is V2Key => k !== undefined);
  const inFlight: { key: string; ttlMs: number }[] = [];
  for (const lock of found.filter((k) => k.kind === 'lock')) {
    const [committed, ttlMs] = await Promise.all([redis.hget(lock.key, 'c'), redis.pttl(lock.key)]);
    if (committed !== '1' && ttlMs !== -2) inFlight.push({ key: lock.key, ttlMs });
  }
  const result = { prefix: keys.prefix, namespace: keys.namespace, copied: 0, kept: 0, inFlight, deleted: 0, done: false };
  if (inFlight.length > 0) return result;

  for (const artifact of found.filter((k) => k.kind === 'artifact')) {
    const [payload, argsHash, ttlMs] = await Promise.all([redis.hgetBuffer(artifact.key, 'p'), redis.hget(artifact.key, 'h'), redis.pttl(artifact.key)]);
    if (payload === null || ttlMs === -2) continue; // expired meanwhile, or not an artifact this library wrote
    const target = keys.artifact(artifact.scope, artifact.id);
    const record = formatArtifact(argsHash ?? '', payload);
    const written = ttlMs > 0 ? await redis.set(target, record, 'PX', ttlMs, 'NX') : await redis.set(target, record, 'NX');
    if (written === null) result.kept++;
    else result.copied++;
  }
  await claimProtocol(redis, keys).catch((err: unknown) => {
    throw new CliError((err as Error).message, EXIT.conflict);
  });
  if (remove) {
    for (const key of found.filter((k) => k.kind !== 'external')) result.deleted += await redis.del(key.key);
  }
  return { ...result, done: true };
}

function v2Key(prefix: string, key: string): V2Key | undefined {
  if (!key.startsWith(`${prefix}:{`)) return undefined;
  const match = V2_KEY.exec(key.slice(prefix.length + 1));
  if (match === null) return undefined;
  return { key, scope: decodeId(match[1]), kind: match[2] as V2Key['kind'], id: decodeId(match[3]) };
}
