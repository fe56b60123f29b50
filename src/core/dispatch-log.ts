import type { RedisClient } from './scripts';

/** Every decision the guard records. */
export type Decision =
  | 'dispatched'
  | 'fast-forwarded'
  | 'in-flight-waited'
  | 'in-flight-skipped'
  | 'in-flight-failed'
  | 'conflict'
  | 'committed'
  | 'released-on-failure'
  | 'release-refused'
  | 'lock-lost'
  | 'release-forced'
  | 'invalidated';

/** One dispatch-log entry. Keys and IDs only: never an argument or result payload. */
export interface DispatchEvent {
  readonly decision: Decision;
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
  /** Epoch milliseconds; set when recorded. */
  readonly ts?: number;
}

/**
 * Stream field names, in order; the CLI reads entries back with the same names.
 *
 * @example
 * ```ts
 * import { EVENT_FIELDS } from 'temporal-fire-once';
 * EVENT_FIELDS.includes('fencingToken'); // true
 * ```
 */
export const EVENT_FIELDS = [
  'decision',
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
  'ts',
] as const;

/**
 * The dispatch log: every decision appended to one capped Redis Stream per key prefix
 * (`XADD <prefix>:log MAXLEN ~ N`). Appends are sent without being awaited, so they ride the
 * same connection right behind the decision's own command and never add a wait to the hot
 * path; a failed append is counted in `dropped`, never thrown.
 *
 * @example
 * ```ts
 * import { DispatchLog, FireOnceKeys } from 'temporal-fire-once';
 * import { Redis } from 'ioredis';
 *
 * export function recordForcedRelease(redis: Redis, scope: string, step: string): void {
 *   const log = new DispatchLog(redis, new FireOnceKeys('fire-once').log(), 100_000);
 *   log.record({ decision: 'release-forced', scope, step, jobType: step });
 * }
 * ```
 */
export class DispatchLog {
  /** Appends that Redis refused (e.g. the stream's node was unreachable). */
  dropped = 0;

  constructor(
    private readonly redis: RedisClient,
    /** The stream key. */
    readonly key: string,
    /** Approximate cap on the stream's length. */
    readonly maxLen: number,
  ) {}

  /** Append one event; returns at once. */
  record(event: DispatchEvent): void {
    const fields: string[] = [];
    const withTs = { ...event, ts: event.ts ?? Date.now() };
    for (const name of EVENT_FIELDS) {
      const value = withTs[name];
      if (value !== undefined && value !== '') fields.push(name, String(value));
    }
    this.redis.xadd(this.key, 'MAXLEN', '~', this.maxLen, '*', ...fields).catch(() => {
      this.dropped++;
    });
  }
}

/**
 * Parse one stream entry's flat field list back into an event.
 *
 * @example
 * ```ts
 * import { parseEvent } from 'temporal-fire-once';
 * import { Redis } from 'ioredis';
 *
 * export async function lastDecisions(redis: Redis, count = 10) {
 *   const entries = await redis.xrevrange('fire-once:log', '+', '-', 'COUNT', count);
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
    ts: num('ts') ?? 0,
  };
}
