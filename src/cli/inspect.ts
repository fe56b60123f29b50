import { holderId } from '../core/guard';
import { decodeId, type FireOnceKeys } from '../core/keys';
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

/** The fire-once lock of one step. */
export interface LockView {
  readonly step: string;
  readonly key: string;
  readonly present: boolean;
  readonly type?: string;
  /** Who holds it: workflow ID, run ID and activity ID, as the guard stored them. */
  readonly holder?: string;
  /** Short hash of the lock's token, as the dispatch log shows it; the token itself is never printed. */
  readonly tokenHash?: string;
  readonly argsHash?: string;
  readonly fencingToken?: number;
  /** The dispatch succeeded and stored its artifact: the lock stops blocking once the artifact is gone. */
  readonly committed?: boolean;
  readonly ttlMs?: TtlLeft;
}

/** The fencing counter of one step: the last fencing token handed out. */
export interface FenceView {
  readonly step: string;
  readonly key: string;
  readonly value: number | null;
  readonly ttlMs?: TtlLeft;
}

/** A result artifact (`artifact:`) or the suggested external artifact key (`external:`) of one job type. */
export interface ArtifactView {
  readonly jobType: string;
  readonly kind: 'artifact' | 'external';
  readonly key: string;
  readonly present: boolean;
  readonly type?: string;
  /** Size of the stored payload (`p` of the hash), or of the string value, in bytes. */
  readonly bytes?: number;
  readonly argsHash?: string;
  readonly ttlMs?: TtlLeft;
  /** Time since it was written, when it can be known; see `ageFrom`. */
  readonly ageMs?: number;
  /** `'artifact-ttl'`: `--artifact-ttl` minus TTL left. `'dispatch-log'`: since its last `committed` entry. */
  readonly ageFrom?: 'artifact-ttl' | 'dispatch-log';
}

/** Everything `fire-once inspect` prints, as `--json` prints it. */
export interface Inspection {
  readonly prefix: string;
  readonly scope: string;
  readonly serverTime: string;
  readonly locks: readonly LockView[];
  readonly fences: readonly FenceView[];
  readonly artifacts: readonly ArtifactView[];
}

/** Read the scope's lock, fencing counter and artifacts; writes nothing. */
export async function inspect(redis: RedisClient, keys: FireOnceKeys, query: InspectQuery): Promise<Inspection> {
  const nowMs = await serverTimeMs(redis);
  let steps = query.step === undefined ? [] : [query.step];
  let jobTypes = query.jobType === undefined ? [] : [query.jobType];
  if (query.step === undefined && query.jobType === undefined) ({ steps, jobTypes } = await discover(redis, keys, query.scope));
  const locks = await Promise.all(steps.map((step) => readLock(redis, keys, query.scope, step)));
  const fences = await Promise.all(steps.map((step) => readFence(redis, keys, query.scope, step)));
  const artifacts: ArtifactView[] = [];
  for (const jobType of jobTypes) {
    artifacts.push(await readArtifact(redis, keys, query, jobType, nowMs));
    const external = await readExternal(redis, keys.external(query.scope, jobType), jobType);
    // The suggested external key is shown when it exists or was asked for by --job-type.
    if (external.present || query.jobType !== undefined) artifacts.push(external);
  }
  return { prefix: keys.prefix, scope: query.scope, serverTime: new Date(nowMs).toISOString(), locks, fences, artifacts };
}

/** The steps and job types that have keys under the scope (SCAN of `<prefix>:{<scope>}:*`). */
async function discover(redis: RedisClient, keys: FireOnceKeys, scope: string): Promise<{ steps: string[]; jobTypes: string[] }> {
  const base = keys.scopeBase(scope); // encoded: no glob character can occur in it
  const steps = new Set<string>();
  const jobTypes = new Set<string>();
  for (const key of await scanKeys(redis, `${base}:*`)) {
    const match = /^:(lock|fence|artifact|external):([^:]+)$/.exec(key.slice(base.length));
    if (!match) continue;
    (match[1] === 'lock' || match[1] === 'fence' ? steps : jobTypes).add(decodeId(match[2]));
  }
  return { steps: [...steps].sort(), jobTypes: [...jobTypes].sort() };
}

async function readLock(redis: RedisClient, keys: FireOnceKeys, scope: string, step: string): Promise<LockView> {
  const key = keys.lock(scope, step);
  const [type, pttl] = await Promise.all([redis.type(key), redis.pttl(key)]);
  if (type === 'none') return { step, key, present: false };
  if (type !== 'hash') return { step, key, present: true, type, ttlMs: ttl(pttl) };
  const lock = await redis.hgetall(key);
  return {
    step,
    key,
    present: true,
    type,
    holder: lock.o ?? '',
    ...(lock.t ? { tokenHash: holderId(lock.t) } : {}),
    ...(lock.h ? { argsHash: lock.h } : {}),
    ...(lock.f ? { fencingToken: Number(lock.f) } : {}),
    committed: lock.c === '1',
    ttlMs: ttl(pttl),
  };
}

async function readFence(redis: RedisClient, keys: FireOnceKeys, scope: string, step: string): Promise<FenceView> {
  const key = keys.fence(scope, step);
  const [value, pttl] = await Promise.all([redis.get(key), redis.pttl(key)]);
  if (value === null) return { step, key, value: null };
  return { step, key, value: Number(value), ttlMs: ttl(pttl) };
}

async function readArtifact(redis: RedisClient, keys: FireOnceKeys, query: InspectQuery, jobType: string, nowMs: number): Promise<ArtifactView> {
  const key = keys.artifact(query.scope, jobType);
  const [type, pttl] = await Promise.all([redis.type(key), redis.pttl(key)]);
  if (type === 'none') return { jobType, kind: 'artifact', key, present: false };
  const ttlMs = ttl(pttl);
  const view = { jobType, kind: 'artifact' as const, key, present: true, type, ttlMs, ...(await sizeOf(redis, key, type)) };
  if (query.artifactTtlMs !== undefined && ttlMs !== null && ttlMs <= query.artifactTtlMs) {
    return { ...view, ageMs: query.artifactTtlMs - ttlMs, ageFrom: 'artifact-ttl' };
  }
  const committed = await findLatest(redis, keys.log(), { decision: 'committed', scope: query.scope, jobType });
  return committed === undefined ? view : { ...view, ageMs: Math.max(0, nowMs - committed.atMs), ageFrom: 'dispatch-log' };
}

async function readExternal(redis: RedisClient, key: string, jobType: string): Promise<ArtifactView> {
  const [type, pttl] = await Promise.all([redis.type(key), redis.pttl(key)]);
  if (type === 'none') return { jobType, kind: 'external', key, present: false };
  return { jobType, kind: 'external', key, present: true, type, ttlMs: ttl(pttl), ...(await sizeOf(redis, key, type)) };
}

async function sizeOf(redis: RedisClient, key: string, type: string): Promise<{ bytes?: number; argsHash?: string }> {
  if (type === 'string') return { bytes: await redis.strlen(key) };
  if (type !== 'hash') return {};
  const [bytes, argsHash] = await Promise.all([redis.hstrlen(key, 'p'), redis.hget(key, 'h')]);
  return { bytes, ...(argsHash ? { argsHash } : {}) };
}

function ttl(pttl: number): TtlLeft {
  return pttl < 0 ? null : pttl;
}
