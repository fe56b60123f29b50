import { join } from 'node:path';
import { eventFields, parseEvent, type EVENT_FIELDS, type DispatchEvent } from '../core/dispatch-log';
import { defineScript, isCluster, type RedisClient } from '../core/scripts';
import { RawConnection } from './raw-connection';
import type { CountedFields } from './stream-scan';

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

/**
 * A raw connection for reading the log fast, to the node that holds `key`: the URL's own server,
 * or on a Redis Cluster the master that owns the key's slot (same credentials and TLS).
 */
export async function openLogReader(redis: RedisClient, url: string, timeoutMs: number, key: string): Promise<RawConnection> {
  if (!isCluster(redis)) return RawConnection.open(url, timeoutMs);
  const slot = Number(await redis.cluster('KEYSLOT', key));
  const owner = redis.slots[slot]?.[0];
  if (owner === undefined) throw new Error(`no node of the cluster owns slot ${slot} of ${key}`);
  const at = new URL(url);
  const colon = owner.lastIndexOf(':');
  at.hostname = owner.slice(0, colon);
  at.port = owner.slice(colon + 1);
  return RawConnection.open(at.toString(), timeoutMs);
}

/**
 * Read the log from `fromMs` to `toMs` (inclusive, Redis's clock) in pages of {@link PAGE_SIZE},
 * handing each entry's ID and counted fields to `visit` as its bytes arrive; no other field is
 * decoded (see `StreamPageScanner`). Memory stays one page, however long the log.
 */
export async function readLog(raw: RawConnection, key: string, fromMs: number, toMs: number, visit: (id: string, fields: CountedFields) => void): Promise<number> {
  const end = String(toMs); // a bare ms ID means "<ms>-<any seq>" as an XRANGE end
  let start = `${fromMs}-0`;
  let read = 0;
  for (;;) {
    const page = await raw.scanPage(['XRANGE', key, start, end, 'COUNT', PAGE_SIZE], visit);
    read += page.count;
    if (page.count < PAGE_SIZE) return read;
    start = `(${page.lastId}`; // exclusive: the page after the last entry read
  }
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
    if (reply[1] === '') return undefined;
    end = `(${reply[1]}`; // exclusive: go on just before the last entry looked at
  }
  return undefined;
}

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
  return { id, atMs: Number(id.slice(0, id.indexOf('-'))), event: parseEvent(fields) };
}
