import type { Redis } from 'ioredis';
import { EVENT_FIELDS, parseEvent, type DispatchEvent } from '../core/dispatch-log';

/** One dispatch-log entry as read back: its stream ID, the server time it was appended, the event. */
export interface LogEntry {
  readonly id: string;
  /** Milliseconds part of the stream ID: Redis's clock when the entry was appended. */
  readonly atMs: number;
  readonly event: ReturnType<typeof parseEvent>;
}

/** Entries fetched per XRANGE: large enough to need few round trips, small enough not to stall Redis. */
export const PAGE_SIZE = 10_000;

/**
 * Read the stream from `fromMs` to `toMs` (inclusive, Redis's clock) in pages of
 * {@link PAGE_SIZE}, handing each entry to `visit`. Memory stays one page, however long the log.
 */
export async function readLog(redis: Redis, key: string, fromMs: number, toMs: number, visit: (entry: LogEntry) => void): Promise<number> {
  let start = `${fromMs}-0`;
  const end = String(toMs); // a bare ms ID means "<ms>-<any seq>" as an XRANGE end
  let read = 0;
  for (;;) {
    const page = await redis.xrange(key, start, end, 'COUNT', PAGE_SIZE);
    for (const [id, fields] of page) {
      visit({ id, atMs: Number(id.slice(0, id.indexOf('-'))), event: parseEvent(fields) });
    }
    read += page.length;
    if (page.length < PAGE_SIZE) return read;
    start = nextId(page[page.length - 1][0]);
  }
}

/**
 * Walk the stream backwards from the newest entry and return the first one `match` accepts, or
 * `undefined` after `maxEntries` or at the start of the log.
 */
export async function findLatest(redis: Redis, key: string, match: (entry: LogEntry) => boolean, maxEntries = 1_000_000): Promise<LogEntry | undefined> {
  let end = '+';
  let seen = 0;
  while (seen < maxEntries) {
    const page = await redis.xrevrange(key, end, '-', 'COUNT', PAGE_SIZE);
    for (const [id, fields] of page) {
      const entry = { id, atMs: Number(id.slice(0, id.indexOf('-'))), event: parseEvent(fields) };
      if (match(entry)) return entry;
    }
    seen += page.length;
    if (page.length < PAGE_SIZE) return undefined;
    end = previousId(page[page.length - 1][0]);
    if (end === '') return undefined;
  }
  return undefined;
}

/**
 * Append one event and wait for Redis to accept it. `DispatchLog.record` sends without waiting
 * (right for the worker's hot path); the CLI must know the entry landed before it reports
 * success. Same field names and encoding, from `EVENT_FIELDS`. No `MAXLEN`: the CLI never trims
 * the log, the workers' appends keep it capped.
 */
export async function appendEvent(redis: Redis, key: string, event: DispatchEvent): Promise<string> {
  const withTs: DispatchEvent = { ...event, ts: event.ts ?? Date.now() };
  const fields: string[] = [];
  for (const name of EVENT_FIELDS) {
    const value = withTs[name];
    if (value !== undefined && value !== '') fields.push(name, String(value));
  }
  const id = await redis.xadd(key, '*', ...fields);
  return id as string;
}

function nextId(id: string): string {
  const [ms, seq] = id.split('-');
  return `${ms}-${BigInt(seq) + 1n}`;
}

function previousId(id: string): string {
  const [ms, seq] = id.split('-');
  if (seq !== '0') return `${ms}-${BigInt(seq) - 1n}`;
  if (ms === '0') return '';
  return `${BigInt(ms) - 1n}-18446744073709551615`;
}
