import type { FireOnceKeys } from './keys';
import { logAppendScript, type RedisClient } from './scripts';
import { atMost } from './store-calls';
import { MAX_TIMER_MS, checkRedisClient, positiveInteger } from './options';

/** The check of a dispatch log's cap, for `DispatchLog` and the plugin's `dispatchLogMaxLen`. */
export const checkLogMaxLen = positiveInteger('entries', 100_000_000);

/** Every decision the guard records. */
export type Decision =
  | 'dispatched'
  | 'fast-forwarded'
  | 'in-flight-waited'
  | 'in-flight-parked'
  | 'in-flight-skipped'
  | 'in-flight-failed'
  | 'conflict'
  | 'committed'
  | 'commit-refused'
  | 'released-on-failure'
  | 'release-refused'
  | 'lock-lost'
  | 'release-forced'
  | 'invalidated';

/** One dispatch-log entry. Keys and IDs only: never an argument or result payload. */
export interface DispatchEvent {
  readonly decision: Decision;
  /** The namespace the decision's keys are filed under; the stream is that namespace's. */
  readonly namespace?: string;
  readonly scope: string;
  readonly step: string;
  readonly jobType: string;
  readonly workflowId?: string;
  readonly runId?: string;
  readonly activityId?: string;
  readonly activityType?: string;
  readonly attempt?: number;
  /** Short hash of the holder's token (see `holderId`). */
  readonly holder?: string;
  readonly fencingToken?: number;
  /**
   * On `invalidated`: Redis's clock in microseconds, as a fencing token reads it, just before the
   * artifact was deleted. `fire-once report` counts a dispatch whose fencing token is at least
   * this one as after the invalidation, however late either entry reached the log.
   */
  readonly redisTime?: number;
  /** The Redis call behind the decision timed out, and this records what it did when it landed later. */
  readonly late?: boolean;
  /** Epoch milliseconds; set when recorded. */
  readonly ts?: number;
}

/**
 * Stream field names, in order; the CLI reads entries back with the same names.
 *
 * @example
 * ```ts
 * import { EVENT_FIELDS } from 'temporal-fire-once/core';
 * EVENT_FIELDS.includes('fencingToken'); // true
 * ```
 */
export const EVENT_FIELDS = [
  'decision',
  'namespace',
  'scope',
  'step',
  'jobType',
  'workflowId',
  'runId',
  'activityId',
  'activityType',
  'attempt',
  'holder',
  'fencingToken',
  'redisTime',
  'late',
  'ts',
] as const;

/**
 * Redis's clock in microseconds, read with `TIME` as `acquire.lua` reads a fencing token: the
 * `redisTime` of an `invalidated` entry. Given a key, it is read inside a one-line script on that
 * key, so that on a Cluster it is the clock of the node that holds the key (the one a step's
 * fencing tokens come from), and the read waits on that node's connection, behind nothing else.
 */
export async function redisTimeMicros(redis: RedisClient, onNodeOf?: string): Promise<number> {
  const reply = onNodeOf === undefined ? redis.time() : redis.eval("return redis.call('TIME')", 1, onNodeOf);
  const [seconds, micros] = (await reply) as (string | number)[];
  return Number(seconds) * 1_000_000 + Number(micros);
}

/** How long decisions gather before they are sent as one batch. */
export const LOG_FLUSH_MS = 20;
/** Most entries one script call carries, so no call grows without bound. */
const MAX_BATCH = 200;

/** An event's stream fields, in {@link EVENT_FIELDS} order, empty values left out. */
export function eventFields(event: DispatchEvent): string[] {
  const fields: string[] = [];
  for (const name of EVENT_FIELDS) {
    const value = name === 'ts' ? (event.ts ?? Date.now()) : event[name];
    if (value !== undefined && value !== '' && value !== false) fields.push(name, value === true ? '1' : String(value));
  }
  return fields;
}

/**
 * The dispatch log: every decision appended to one capped Redis Stream per namespace
 * (`<prefix>:v3:<ns>:log`, `MAXLEN ~ N`). Decisions gather for {@link LOG_FLUSH_MS} and go out
 * as one script call per stream, never awaited by the decision that made them, so the log adds
 * no wait to the hot path and about one command per batch instead of one per decision. A batch
 * that Redis refuses is counted in `dropped`, never thrown; a worker that dies loses at most the
 * batch it was gathering.
 *
 * @example
 * ```ts
 * import { DispatchLog, FireOnceKeys } from 'temporal-fire-once/core';
 * import { Redis } from 'ioredis';
 *
 * export async function recordForcedRelease(redis: Redis, scope: string, step: string): Promise<void> {
 *   const log = new DispatchLog(redis, new FireOnceKeys('fire-once'), 100_000);
 *   log.record({ decision: 'release-forced', scope, step, jobType: step });
 *   await log.flush();
 * }
 * ```
 */
export class DispatchLog {
  /** Entries that Redis refused (e.g. the stream's node was unreachable). */
  dropped = 0;
  private pending = new Map<string, string[][]>();
  private timer: NodeJS.Timeout | undefined;
  /** Batches sent and not yet answered, with their entry counts. */
  private inFlight = new Map<Promise<unknown>, number>();

  constructor(
    private readonly redis: RedisClient,
    /** The key layout; each event goes to its namespace's stream. */
    readonly keys: FireOnceKeys,
    /** Approximate cap on each stream's length: a positive integer, as `dispatchLogMaxLen` takes it. */
    readonly maxLen: number,
  ) {
    checkRedisClient(redis, 'DispatchLog');
    // It goes to every XADD as MAXLEN ~: Redis refuses NaN, a fraction or a negative (every batch
    // dropped), and 0 trims the stream to almost nothing.
    checkLogMaxLen('DispatchLog: maxLen', maxLen);
  }

  /** Queue one event; returns at once. */
  record(event: DispatchEvent): void {
    const stream = this.keys.forNamespace(event.namespace ?? this.keys.namespace).log();
    const fields = eventFields(event);
    let batch = this.pending.get(stream);
    if (batch === undefined) this.pending.set(stream, (batch = []));
    batch.push(fields);
    this.timer ??= setTimeout(() => void this.flush(), LOG_FLUSH_MS);
  }

  /**
   * Send everything queued now; resolves once Redis has answered (or refused) every batch, or
   * after `timeoutMs` if given, with the number of entries still unanswered then (0 when all
   * were): a client that queues commands until Redis comes back would otherwise keep it waiting.
   */
  async flush(timeoutMs?: number): Promise<number> {
    if (timeoutMs !== undefined) positiveInteger('ms', MAX_TIMER_MS)('DispatchLog.flush: timeoutMs', timeoutMs);
    clearTimeout(this.timer);
    this.timer = undefined;
    const batches = this.pending;
    this.pending = new Map();
    for (const [stream, entries] of batches) {
      for (let start = 0; start < entries.length; start += MAX_BATCH) this.send(stream, entries.slice(start, start + MAX_BATCH));
    }
    const answered = Promise.all([...this.inFlight.keys()]);
    if (timeoutMs === undefined) return answered.then(() => 0);
    await atMost(answered, timeoutMs);
    let unanswered = 0;
    for (const entries of this.inFlight.values()) unanswered += entries;
    return unanswered;
  }

  private send(stream: string, entries: readonly string[][]): void {
    // Built by pushes: spreading each entry and flattening the batch cost three times the CPU
    // (bench/RESULTS.md, "the dispatch log's encoding").
    const args: (string | number)[] = [this.maxLen];
    for (const fields of entries) {
      args.push(fields.length);
      for (const field of fields) args.push(field);
    }
    const sent = logAppendScript(this.redis, [stream], args).then(
      () => undefined,
      () => {
        this.dropped += entries.length;
      },
    );
    this.inFlight.set(sent, entries.length);
    void sent.finally(() => this.inFlight.delete(sent));
  }
}

/**
 * Parse one stream entry's flat field list back into an event.
 *
 * @example
 * ```ts
 * import { parseEvent } from 'temporal-fire-once/core';
 * import { Redis } from 'ioredis';
 *
 * export async function lastDecisions(redis: Redis, count = 10) {
 *   const entries = await redis.xrevrange('fire-once:v3:default:log', '+', '-', 'COUNT', count);
 *   return entries.map(([, fields]) => parseEvent(fields));
 * }
 * ```
 */
export function parseEvent(fields: readonly string[]): DispatchEvent & { ts: number } {
  const map = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2) map.set(fields[i], fields[i + 1]);
  const num = (name: string) => (map.has(name) ? Number(map.get(name)) : undefined);
  return {
    decision: map.get('decision') as Decision,
    namespace: map.get('namespace'),
    scope: map.get('scope') ?? '',
    step: map.get('step') ?? '',
    jobType: map.get('jobType') ?? '',
    workflowId: map.get('workflowId'),
    runId: map.get('runId'),
    activityId: map.get('activityId'),
    activityType: map.get('activityType'),
    attempt: num('attempt'),
    holder: map.get('holder'),
    fencingToken: num('fencingToken'),
    redisTime: num('redisTime'),
    ...(map.get('late') === '1' ? { late: true } : {}),
    ts: num('ts') ?? 0,
  };
}
