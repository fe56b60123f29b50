import type { Redis } from 'ioredis';
import { EVENT_FIELDS, parseEvent, type DispatchEvent } from '../core/dispatch-log';
import type { RawConnection } from './raw-connection';

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
 * Reads through a {@link RawConnection}: ioredis's reply decoder would take seconds per 100k entries.
 */
export async function readLog(raw: RawConnection, key: string, fromMs: number, toMs: number, visit: (entry: LogEntry) => void): Promise<number> {
  const end = String(toMs); // a bare ms ID means "<ms>-<any seq>" as an XRANGE end
  const page = (start: string) => raw.call(['XRANGE', key, start, end, 'COUNT', PAGE_SIZE]) as Promise<[string, string[]][]>;
  let pending = page(`${fromMs}-0`);
  let read = 0;
  for (;;) {
    const entries = await pending;
    const full = entries.length === PAGE_SIZE;
    // Ask for the next page before counting this one, so Redis serialises it meanwhile.
    if (full) pending = page(nextId(entries[entries.length - 1][0]));
    for (const [id, fields] of entries) {
      visit({ id, atMs: Number(id.slice(0, id.indexOf('-'))), event: toEvent(fields) });
    }
    read += entries.length;
    if (!full) return read;
  }
}

/**
 * Walk the stream backwards from the newest entry and return the first one `match` accepts, or
 * `undefined` after `maxEntries` or at the start of the log.
 */
export async function findLatest(raw: RawConnection, key: string, match: (entry: LogEntry) => boolean, maxEntries = 1_000_000): Promise<LogEntry | undefined> {
  let end = '+';
  let seen = 0;
  while (seen < maxEntries) {
    const page = (await raw.call(['XREVRANGE', key, end, '-', 'COUNT', PAGE_SIZE])) as [string, string[]][];
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

/**
 * `parseEvent`, without its per-entry Map: the report calls this 100,000 times per 100,000
 * entries. Same field names (`EVENT_FIELDS`), same result; `test/cli/log.test.ts` checks the
 * two agree.
 */
export function toEvent(fields: readonly string[]): LogEntry['event'] {
  const event: { -readonly [K in keyof LogEntry['event']]: LogEntry['event'][K] } = { decision: undefined as never, scope: '', step: '', jobType: '', ts: 0 };
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const value = fields[i + 1];
    switch (fields[i]) {
      case 'decision':
        event.decision = value as LogEntry['event']['decision'];
        break;
      case 'scope':
      case 'step':
      case 'jobType':
      case 'workflowId':
      case 'runId':
      case 'activityId':
      case 'activityType':
      case 'holder':
        event[fields[i] as 'scope'] = value;
        break;
      case 'attempt':
      case 'fencingToken':
      case 'ts':
        event[fields[i] as 'ts'] = Number(value);
        break;
    }
  }
  return event;
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
