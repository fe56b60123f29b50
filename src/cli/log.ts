import { join } from 'node:path';
import { eventFields, parseEvent, type EVENT_FIELDS, type DispatchEvent } from '../core/dispatch-log';
import type { FireOnceKeys } from '../core/keys';
import { defineScript, type RedisClient } from '../core/scripts';

/** One dispatch-log entry as read back: its stream ID, the server time it was appended, the event. */
export interface LogEntry {
  readonly id: string;
  /** Milliseconds part of the stream ID: Redis's clock when the entry was appended. */
  readonly atMs: number;
  readonly event: ReturnType<typeof parseEvent>;
}

/**
 * Entries per read. `XRANGE` pages this size keep Redis busy for a few milliseconds each (see
 * bench/RESULTS.md), and the walks of `findLatest` look at this many entries per script call.
 */
export const PAGE_SIZE = 5_000;

const findLatestScript = defineScript<string[], [1, string, string[]] | [0, string]>('find-latest.lua', 'fireOnceFindLatestV1', 1, join(__dirname, 'scripts'));

/** The fields of a dispatch-log entry that `fire-once report` counts by. */
export interface CountedFields {
  readonly decision: string;
  readonly scope: string;
  readonly step: string;
  readonly jobType: string;
  readonly holder: string | undefined;
  /** Redis's clock in microseconds at the acquire (`dispatched` and the holder's later entries). */
  readonly fencingToken: number | undefined;
  /** Redis's clock in microseconds just before an invalidation (`invalidated`, from 0.9.0). */
  readonly redisTime: number | undefined;
}

/**
 * Read the log from `fromMs` to `toMs` (inclusive, Redis's clock) in pages of {@link PAGE_SIZE},
 * handing each entry's ID and counted fields to `visit`. The next page is asked for before this
 * one is counted, so Redis and the count overlap. Memory stays two pages, however long the log.
 * On a Redis Cluster the client sends each page to the master that owns the log's slot.
 */
export async function readLog(
  redis: RedisClient,
  key: string,
  fromMs: number,
  toMs: number,
  visit: (id: string, fields: CountedFields) => void,
): Promise<number> {
  const end = String(toMs); // a bare ms ID means "<ms>-<any seq>" as an XRANGE end
  let next = redis.xrangeBuffer(key, `${fromMs}-0`, end, 'COUNT', PAGE_SIZE);
  let read = 0;
  for (;;) {
    const page = await next;
    if (page.length === PAGE_SIZE) next = redis.xrangeBuffer(key, idAfter(page[page.length - 1][0].toString()), end, 'COUNT', PAGE_SIZE);
    for (const [id, fields] of page) visit(id.toString(), counted(fields));
    read += page.length;
    if (page.length < PAGE_SIZE) return read;
  }
}

/**
 * The names of the fields counted by. Each is of another length, so that `counted` compares a
 * field's name with one of them at most: a chain of seven `equals` per field cost the report about
 * 40 ms more per 100,000 entries than 0.8.0's five.
 */
const COUNTED = ['decision', 'scope', 'step', 'jobType', 'holder', 'fencingToken', 'redisTime'].map((name) => Buffer.from(name));
/** The index in {@link COUNTED} of the name of each length. */
const COUNTED_BY_LENGTH: (number | undefined)[] = [];
COUNTED.forEach((name, i) => (COUNTED_BY_LENGTH[name.length] = i));
if (COUNTED_BY_LENGTH.filter((i) => i !== undefined).length !== COUNTED.length) throw new Error('the counted field names must differ in length');

/** The counted fields of one entry, decoding no other value. */
function counted(fields: readonly Buffer[]): CountedFields {
  const values: (Buffer | undefined)[] = new Array<Buffer | undefined>(COUNTED.length);
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const k = COUNTED_BY_LENGTH[fields[i].length];
    if (k !== undefined && fields[i].equals(COUNTED[k])) values[k] = fields[i + 1];
  }
  const [decision, scope, step, jobType, holder, fencingToken, redisTime] = values;
  return {
    decision: decision?.toString() ?? '',
    scope: scope?.toString() ?? '',
    step: step?.toString() ?? '',
    jobType: jobType?.toString() ?? '',
    holder: holder?.toString(),
    fencingToken: fencingToken && clockOf(fencingToken),
    redisTime: redisTime && clockOf(redisTime),
  };
}

/** A clock field's value; `undefined` for one that is not a whole number (not written by the guard). */
function clockOf(value: Buffer): number | undefined {
  const n = Number(value.toString());
  return Number.isSafeInteger(n) ? n : undefined;
}

/** The entries with these IDs, in the order given (an ID no longer in the log is left out). */
export async function readEntries(redis: RedisClient, key: string, ids: readonly string[]): Promise<LogEntry[]> {
  const replies = await Promise.all(ids.map((id) => redis.xrange(key, id, id)));
  return replies.flatMap((reply) => reply.map(([id, fields]) => toEntry(id, fields)));
}

/**
 * The newest entry whose fields equal every value in `match` (a field the entry lacks counts as
 * `''`), found by walking the log backwards on the server, {@link PAGE_SIZE} entries per call;
 * `undefined` after `maxEntries` or at the start of the log.
 */
export async function findLatest(
  redis: RedisClient,
  key: string,
  match: Partial<Record<(typeof EVENT_FIELDS)[number], string>>,
  maxEntries = 1_000_000,
): Promise<LogEntry | undefined> {
  const pairs = Object.entries(match).flatMap(([name, value]) => [name, value ?? '']);
  let end = '+';
  for (let seen = 0; seen < maxEntries; seen += PAGE_SIZE) {
    const reply = await findLatestScript(redis, [key], [end, String(PAGE_SIZE), ...pairs]);
    if (reply[0] === 1) return toEntry(reply[1], reply[2]);
    const before = reply[1] === '' ? undefined : idBefore(reply[1]); // go on just before the last entry looked at
    if (before === undefined) return undefined;
    end = before;
  }
  return undefined;
}

/**
 * The job type a lock's dispatch was logged under: the lock does not store it, the holder's
 * `dispatched` entry does (found by the hash of the lock's token when known). `''` when the log
 * has no such entry (e.g. `dispatchLog: false`, or trimmed).
 */
export async function loggedJobType(redis: RedisClient, keys: FireOnceKeys, scope: string, step: string, tokenHash: string | undefined): Promise<string> {
  const entry = await findLatest(redis, keys.log(), { decision: 'dispatched', scope, step, ...(tokenHash === undefined ? {} : { holder: tokenHash }) });
  return entry?.event.jobType ?? '';
}

/**
 * The first stream ID after `id`, and the last one before it (`undefined` before `0-0`): the
 * bounds of a range that excludes `id`, in the form every Redis since 5.0 takes (the `(`
 * prefix for exclusive ranges came with 6.2).
 */
export function idAfter(id: string): string {
  const [ms, seq] = id.split('-').map(BigInt);
  return seq === MAX_SEQ ? `${ms + 1n}-0` : `${ms}-${seq + 1n}`;
}
export function idBefore(id: string): string | undefined {
  const [ms, seq] = id.split('-').map(BigInt);
  if (seq > 0n) return `${ms}-${seq - 1n}`;
  return ms > 0n ? `${ms - 1n}-${MAX_SEQ}` : undefined;
}
const MAX_SEQ = 2n ** 64n - 1n;

/**
 * Append one event and wait for Redis to accept it. `DispatchLog.record` sends without waiting
 * (right for the worker's hot path); the CLI must know the entry landed before it reports
 * success. Same field names and encoding, from `EVENT_FIELDS`. No `MAXLEN`: the CLI never trims
 * the log, the workers' appends keep it capped.
 */
export async function appendEvent(redis: RedisClient, key: string, event: DispatchEvent): Promise<string> {
  const id = await redis.xadd(key, '*', ...eventFields(event));
  return id as string;
}

function toEntry(id: string, fields: string[]): LogEntry {
  return { id, atMs: streamIdMs(id), event: parseEvent(fields) };
}

/** The milliseconds part of a stream ID: Redis's clock when the entry was appended. */
export function streamIdMs(id: string): number {
  return Number(id.slice(0, id.indexOf('-')));
}
