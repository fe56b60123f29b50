import { PROTOCOL_VERSION, decodeId, type FireOnceKeys } from '../core/keys';
import { claimProtocol } from '../core/protocol';
import { formatArtifact } from '../core/records';
import type { RedisClient } from '../core/scripts';
import { isWrongType } from '../core/store-calls';
import { CliError, EXIT } from './exit-codes';
import { printable, quoted } from './printable';
import { scanKeys } from './scan';

/** A key of the protocol v2 layout: `<prefix>:{<scope>}:<kind>:<id>`. */
interface V2Key {
  readonly key: string;
  readonly scope: string;
  readonly kind: 'artifact' | 'lock' | 'fence';
  readonly id: string;
}

/** A v2-shaped key that holds something v2 never wrote there: left alone, and reported. */
export interface SkippedKey {
  readonly key: string;
  /** What it holds, e.g. `a list, not a v2 artifact`. */
  readonly what: string;
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
  /** v2-shaped keys that are not what v2 writes there: neither copied nor deleted. */
  readonly skipped: readonly SkippedKey[];
  readonly done: boolean;
  /**
   * No key of 0.1 was found and the prefix had no marker: `migrate` only marked it, as an admin
   * does for workers whose Redis user may not write the marker, or for a mistyped prefix.
   */
  readonly markedOnly: boolean;
}

const V2_KEY = /^\{([^{}]+)\}:(artifact|lock|fence|external):([^:]+)$/;
/** How many unreadable keys an error names before it says "and N more". */
const NAMED_AT_MOST = 10;

/**
 * Move a key prefix from protocol v2 to v3. v3 reads nothing of v2, so every v2 result artifact
 * (a hash `{p, h}`) is copied into the v3 layout of `keys.namespace`, with the TTL it has left,
 * unless v3 already holds one; then the prefix's protocol marker is set to 3.
 *
 * Before it writes anything it refuses a prefix marked by another protocol version (exit 5), a
 * v2-shaped key whose IDs do not decode (exit 8: v2 never wrote it), and a v2 dispatch in flight (a
 * v2 lock not marked committed; exit 5): stop the v2 workers first and let their locks run out.
 * A v2-shaped key that holds another type, or a value v2 never writes there, is skipped and
 * reported. With `remove`, the v2 keys it read as v2's own are deleted after the copy: the
 * artifacts copied (or already held in v3), the committed locks and the fencing counters. Suggested
 * external keys are the job's own and are never touched.
 */
export async function migrate(redis: RedisClient, keys: FireOnceKeys, remove: boolean): Promise<MigrateResult> {
  const marked = await refuseOtherProtocol(redis, keys);
  const found = await v2KeysOf(redis, keys.prefix);
  const skipped: SkippedKey[] = [];
  const inFlight: { key: string; ttlMs: number }[] = [];
  const artifacts: V2Key[] = [];
  const deletable: string[] = [];
  for (const k of found) {
    const seen = await classify(redis, k);
    if (seen.kind === 'gone') continue;
    if (seen.kind === 'skipped') skipped.push({ key: k.key, what: seen.what });
    else if (seen.kind === 'in-flight') inFlight.push({ key: k.key, ttlMs: seen.ttlMs });
    else if (k.kind === 'artifact') artifacts.push(k);
    else deletable.push(k.key);
  }
  const markedOnly = found.length === 0 && !marked;
  const result = { prefix: keys.prefix, namespace: keys.namespace, copied: 0, kept: 0, inFlight, deleted: 0, skipped, done: false, markedOnly };
  if (inFlight.length > 0) return result;

  for (const artifact of artifacts) {
    const read = await unlessWrongType(() =>
      Promise.all([redis.hgetBuffer(artifact.key, 'p'), redis.hget(artifact.key, 'h'), redis.pttl(artifact.key)] as const),
    );
    if (read === undefined) {
      skipped.push({ key: artifact.key, what: 'a key that changed type while it was read, not a v2 artifact' });
      continue;
    }
    const [payload, argsHash, ttlMs] = read;
    if (payload === null || ttlMs === -2) continue; // expired meanwhile
    const target = keys.artifact(artifact.scope, artifact.id);
    const record = formatArtifact(argsHash ?? '', payload);
    const written = ttlMs > 0 ? await redis.set(target, record, 'PX', ttlMs, 'NX') : await redis.set(target, record, 'NX');
    if (written === null) result.kept++;
    else result.copied++;
    deletable.push(artifact.key);
  }
  await claimProtocol(redis, keys).catch((err: unknown) => {
    throw new CliError((err as Error).message, EXIT.conflict);
  });
  if (remove) {
    for (const key of deletable) result.deleted += await redis.del(key);
  }
  return { ...result, done: true };
}

/**
 * Exit 5, before anything is written, if the prefix's marker names another protocol version;
 * whether it is marked with this one.
 */
async function refuseOtherProtocol(redis: RedisClient, keys: FireOnceKeys): Promise<boolean> {
  const marker = keys.protocolMarker();
  const found = await unlessWrongType(() => redis.get(marker));
  if (found === undefined) {
    throw new CliError(`${marker} is not a string: it is no protocol marker this library writes; migrate changed nothing`, EXIT.unexpectedData);
  }
  if (found === null || found === String(PROTOCOL_VERSION)) return found !== null;
  throw new CliError(
    `key prefix ${JSON.stringify(keys.prefix)} is written with fire-once protocol ${quoted(found)} (${marker}), not 2 or ${PROTOCOL_VERSION}: ` +
      `migrate moves protocol 2 to ${PROTOCOL_VERSION} and changed nothing`,
    EXIT.conflict,
  );
}

/**
 * Every v2-shaped key under the prefix but the external ones; exit 8, before anything is written,
 * if one names an ID that does not decode, that the guard refuses, or that is encoded otherwise than
 * v2 wrote it (v2 encoded its IDs as v3 does): read as the ID it decodes to, such a key would pass for
 * that scope's own, and its value would be copied over the real result.
 */
async function v2KeysOf(redis: RedisClient, prefix: string): Promise<V2Key[]> {
  const found: V2Key[] = [];
  const unreadable: string[] = [];
  for (const key of (await scanKeys(redis, `${prefix}:{*`)).sort()) {
    const match = V2_KEY.exec(key.slice(prefix.length + 1));
    if (match === null || match[2] === 'external') continue;
    const kind = match[2] as V2Key['kind'];
    const scope = readId(match[1]);
    const id = readId(match[3]);
    if (scope === undefined || id === undefined) unreadable.push(key);
    else found.push({ key, scope, kind, id });
  }
  if (unreadable.length > 0) {
    const named = unreadable.slice(0, NAMED_AT_MOST).map(printable).join(', ');
    const more = unreadable.length > NAMED_AT_MOST ? ` and ${unreadable.length - NAMED_AT_MOST} more` : '';
    throw new CliError(
      `${unreadable.length} key(s) under ${prefix}:{ have the v2 layout but IDs that cannot be read back, so this library did not write them: ${named}${more}. ` +
        'Rename or delete them, then run migrate again; it changed nothing',
      EXIT.unexpectedData,
    );
  }
  return found;
}

/** The ID an encoded key part stands for, if it is an ID the guard accepts, encoded as v2 (and v3) wrote it. */
function readId(encoded: string): string | undefined {
  try {
    return decodeId(encoded);
  } catch {
    return undefined;
  }
}

type Seen = { kind: 'gone' } | { kind: 'skipped'; what: string } | { kind: 'in-flight'; ttlMs: number } | { kind: 'v2' };

/** What a v2-shaped key holds: gone, v2's own (a committed lock, a counter, an artifact), in flight, or something else. */
async function classify(redis: RedisClient, k: V2Key): Promise<Seen> {
  const type = await redis.type(k.key);
  if (type === 'none') return { kind: 'gone' };
  const not = { artifact: 'not a v2 artifact', lock: 'not a v2 lock', fence: 'not a v2 fencing counter' }[k.kind];
  const expected = k.kind === 'fence' ? 'string' : 'hash';
  if (type !== expected) return { kind: 'skipped', what: `${article(type)} ${type}, ${not}` };
  const changed: Seen = { kind: 'skipped', what: `a key that changed type while it was read, ${not}` };
  if (k.kind === 'fence') {
    const value = await unlessWrongType(() => redis.get(k.key));
    if (value === undefined) return changed;
    if (value === null) return { kind: 'gone' };
    return /^\d+$/.test(value) ? { kind: 'v2' } : { kind: 'skipped', what: `a string that is not a counter, ${not}` };
  }
  const field = k.kind === 'artifact' ? 'p' : 't';
  const read = await unlessWrongType(() => Promise.all([redis.hmget(k.key, field, 'c'), redis.pttl(k.key)] as const));
  if (read === undefined) return changed;
  const [[present, committed], ttlMs] = read;
  if (ttlMs === -2) return { kind: 'gone' };
  if (present === null) return { kind: 'skipped', what: `a hash without the ${k.kind === 'artifact' ? 'payload field p' : 'token field t'}, ${not}` };
  if (k.kind === 'lock' && committed !== '1') return { kind: 'in-flight', ttlMs };
  return { kind: 'v2' };
}

function article(type: string): string {
  return /^[aeiou]/.test(type) ? 'an' : 'a';
}

/** `read()`, or `undefined` if Redis answers WRONGTYPE: the key changed type after it was looked at. */
async function unlessWrongType<T>(read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch (err) {
    if (isWrongType(err)) return undefined;
    throw err;
  }
}
