import { holderId } from '../core/outcomes';
import type { FireOnceKeys } from '../core/keys';
import { parseArtifact, parseLock } from '../core/records';
import type { RedisClient } from '../core/scripts';
import { serverTimeMs } from './args';
import { findLatest } from './log';
import { scanKeys } from './scan';

/** What to look at; with neither `step` nor `jobType`, everything stored under the scope. */
export interface InspectQuery {
  readonly scope: string;
  readonly step?: string;
  readonly jobType?: string;
  /** The `artifactTtlMs` the artifact was written with, if known: then age = TTL − TTL left. */
  readonly artifactTtlMs?: number;
}

/** `PTTL`'s answer made plain: ms left, `null` for a key without expiry. */
export type TtlLeft = number | null;

/** The fire-once lock of one step, and the waiters parked on it. */
export interface LockView {
  readonly step: string;
  readonly key: string;
  readonly present: boolean;
  /** The lock holds something this protocol never writes (another type, or an unreadable value). */
  readonly foreign?: string;
  /** Who holds it: workflow ID, run ID and activity ID, as the guard stored them. */
  readonly holder?: string;
  /** Short hash of the lock's token, as the dispatch log shows it; the token itself is never printed. */
  readonly tokenHash?: string;
  readonly argsHash?: string;
  readonly fencingToken?: number;
  readonly ttlMs?: TtlLeft;
  /** Time since it was taken, by Redis's clock: now minus its fencing token. */
  readonly heldMs?: number;
  /** Waiters parked on the lock (their task tokens are never printed). */
  readonly parkedWaiters: number;
}

/** A result artifact (`a:`) or the suggested external artifact key (`x:`) of one job type. */
export interface ArtifactView {
  readonly jobType: string;
  readonly kind: 'artifact' | 'external';
  readonly key: string;
  readonly present: boolean;
  readonly type?: string;
  /** The value is not an artifact record this protocol writes. */
  readonly foreign?: boolean;
  /** Size of the stored payload (artifact), or of the string value (external), in bytes. */
  readonly bytes?: number;
  readonly argsHash?: string;
  readonly ttlMs?: TtlLeft;
  /** Time since it was written, when it can be known; see `ageFrom`. */
  readonly ageMs?: number;
  /** `'artifact-ttl'`: `--artifact-ttl` minus TTL left. `'dispatch-log'`: since its last `committed` entry. */
  readonly ageFrom?: 'artifact-ttl' | 'dispatch-log';
  /** `--artifact-ttl` was given but is shorter than the TTL left (or the key has none): the artifact was not written with it. */
  readonly artifactTtlWrong?: true;
}

/** Everything `fire-once inspect` prints, as `--json` prints it. */
export interface Inspection {
  readonly prefix: string;
  readonly namespace: string;
  readonly scope: string;
  readonly serverTime: string;
  readonly locks: readonly LockView[];
  readonly artifacts: readonly ArtifactView[];
  /**
   * Keys under the scope's hash tag that the guard does not write, such as an external artifact
   * your workers name themselves (the guard fast-forwards on it); found only by the SCAN that runs
   * with neither `step` nor `jobType`.
   */
  readonly otherKeys: readonly { readonly key: string; readonly type: string; readonly ttlMs: TtlLeft }[];
}

/**
 * The lock with how long it has been held: its fencing token is Redis's clock (µs) when it was
 * taken, and `nowMs` Redis's clock now, so no host clock enters it.
 */
function heldFor(lock: LockView, nowMs: number): LockView {
  return lock.fencingToken === undefined ? lock : { ...lock, heldMs: Math.max(0, nowMs - Math.floor(lock.fencingToken / 1_000)) };
}

/** Read the scope's locks, parked waiters and artifacts in one namespace; writes nothing. */
export async function inspect(redis: RedisClient, keys: FireOnceKeys, query: InspectQuery): Promise<Inspection> {
  const nowMs = await serverTimeMs(redis);
  let steps = query.step === undefined ? [] : [query.step];
  let jobTypes = query.jobType === undefined ? [] : [query.jobType];
  let others: string[] = [];
  if (query.step === undefined && query.jobType === undefined) ({ steps, jobTypes, others } = await discover(redis, keys, query.scope));
  const locks = await Promise.all(steps.map(async (step) => heldFor((await readLock(redis, keys, query.scope, step)).view, nowMs)));
  const artifacts: ArtifactView[] = [];
  for (const jobType of jobTypes) {
    artifacts.push(await readArtifact(redis, keys, query, jobType, nowMs));
    const external = await readExternal(redis, keys.external(query.scope, jobType), jobType);
    // The suggested external key is shown when it exists or was asked for by --job-type.
    if (external.present || query.jobType !== undefined) artifacts.push(external);
  }
  const otherKeys = await Promise.all(
    others.map(async (key) => {
      const [type, pttl] = await Promise.all([redis.type(key), redis.pttl(key)]);
      return { key, type, ttlMs: ttl(pttl) };
    }),
  );
  return { prefix: keys.prefix, namespace: keys.namespace, scope: query.scope, serverTime: new Date(nowMs).toISOString(), locks, artifacts, otherKeys };
}

/** The steps and job types that have keys under the scope (SCAN of its hash tag), and the keys the guard does not write. */
async function discover(redis: RedisClient, keys: FireOnceKeys, scope: string): Promise<{ steps: string[]; jobTypes: string[]; others: string[] }> {
  const steps = new Set<string>();
  const jobTypes = new Set<string>();
  const others: string[] = [];
  for (const key of await scanKeys(redis, `${keys.scopeBase(scope)}:*`)) {
    const parsed = keys.parse(key);
    if (parsed?.id === undefined) others.push(key);
    else (parsed.kind === 'lock' || parsed.kind === 'waiters' ? steps : jobTypes).add(parsed.id);
  }
  return { steps: [...steps].sort(), jobTypes: [...jobTypes].sort(), others: others.sort() };
}

/**
 * The lock of `(scope, step)` as {@link LockView}, and its raw value (token included) for a
 * compare-and-delete; `inspect` shows only the view, `release` uses both.
 */
export async function readLock(
  redis: RedisClient,
  keys: FireOnceKeys,
  scope: string,
  step: string,
): Promise<{ readonly view: LockView; readonly value?: string }> {
  const key = keys.lock(scope, step);
  const [type, pttl, parkedWaiters] = await Promise.all([redis.type(key), redis.pttl(key), redis.llen(keys.waiters(scope, step)).catch(() => 0)]);
  if (type === 'none') return { view: { step, key, present: false, parkedWaiters } };
  if (type !== 'string') return { view: { step, key, present: true, foreign: `a ${type}`, ttlMs: ttl(pttl), parkedWaiters } };
  const value = await redis.get(key);
  // Gone since TYPE answered (it expired, or was released): absent, not an unreadable string.
  if (value === null) return { view: { step, key, present: false, parkedWaiters } };
  const lock = parseLock(value);
  if (lock === undefined) return { view: { step, key, present: true, foreign: 'an unreadable string', ttlMs: ttl(pttl), parkedWaiters } };
  const view: LockView = {
    step,
    key,
    present: true,
    holder: lock.holder,
    tokenHash: holderId(lock.token),
    ...(lock.argsHash ? { argsHash: lock.argsHash } : {}),
    fencingToken: lock.fencingToken,
    ttlMs: ttl(pttl),
    parkedWaiters,
  };
  return { view, value };
}

async function readArtifact(redis: RedisClient, keys: FireOnceKeys, query: InspectQuery, jobType: string, nowMs: number): Promise<ArtifactView> {
  const key = keys.artifact(query.scope, jobType);
  const [type, pttl] = await Promise.all([redis.type(key), redis.pttl(key)]);
  if (type === 'none') return { jobType, kind: 'artifact', key, present: false };
  const ttlMs = ttl(pttl);
  const record = type === 'string' ? parseArtifact((await redis.getBuffer(key)) ?? Buffer.alloc(0)) : undefined;
  const view: ArtifactView = record
    ? { jobType, kind: 'artifact', key, present: true, type, ttlMs, bytes: record.payload.length, ...(record.argsHash ? { argsHash: record.argsHash } : {}) }
    : { jobType, kind: 'artifact', key, present: true, type, ttlMs, foreign: true };
  if (query.artifactTtlMs !== undefined && ttlMs !== null && ttlMs <= query.artifactTtlMs) {
    return { ...view, ageMs: query.artifactTtlMs - ttlMs, ageFrom: 'artifact-ttl' };
  }
  const checked: ArtifactView = query.artifactTtlMs === undefined ? view : { ...view, artifactTtlWrong: true };
  const committed = await findLatest(redis, keys.log(), { decision: 'committed', scope: query.scope, jobType });
  return committed === undefined ? checked : { ...checked, ageMs: Math.max(0, nowMs - committed.atMs), ageFrom: 'dispatch-log' };
}

async function readExternal(redis: RedisClient, key: string, jobType: string): Promise<ArtifactView> {
  const [type, pttl] = await Promise.all([redis.type(key), redis.pttl(key)]);
  if (type === 'none') return { jobType, kind: 'external', key, present: false };
  return { jobType, kind: 'external', key, present: true, type, ttlMs: ttl(pttl), ...(type === 'string' ? { bytes: await redis.strlen(key) } : {}) };
}

function ttl(pttl: number): TtlLeft {
  return pttl < 0 ? null : pttl;
}
