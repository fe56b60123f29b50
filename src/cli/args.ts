import { redisTimeMicros } from '../core/dispatch-log';
import { DEFAULT_NAMESPACE, FireOnceKeys, checkKeyPrefix, encodeId, type IdKind } from '../core/keys';
import { GUARD_DEFAULTS, MAX_DURATION_MS, MAX_TIMER_MS } from '../core/options';
import type { RedisClient } from '../core/scripts';
import type { ConnectOptions } from './connect';
import { CliError, EXIT } from './exit-codes';

/** The options every command takes. */
export interface CommonOptions {
  readonly redis?: string;
  readonly prefix: string;
  readonly namespace: string;
  readonly json?: boolean;
  readonly timeout: string;
  readonly allowEvictingRedis?: boolean;
}

/** The key prefix the guard uses when none is configured. */
export const DEFAULT_PREFIX = GUARD_DEFAULTS.keyPrefix;
/** The Temporal namespace the CLI reads and writes when `--namespace` is not given. */
export { DEFAULT_NAMESPACE };
/** Where the CLI looks for Redis when neither `--redis` nor `REDIS_URL` says. */
const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

const UNITS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** `'90s'`, `'15m'`, `'1h'`, `'7d'`, `'250ms'` → milliseconds. `what` names the option in errors. */
export function parseDuration(what: string, text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d|w)$/.exec(text.trim());
  const ms = match ? Math.round(Number(match[1]) * UNITS[match[2]]) : NaN;
  if (!Number.isFinite(ms) || ms <= 0) {
    throw new CliError(`${what} must be a duration such as 90s, 15m, 1h or 7d (got ${JSON.stringify(text)})`, EXIT.usage);
  }
  return ms;
}

/**
 * `--timeout`: a duration as {@link parseDuration}, at most {@link MAX_TIMER_MS} (about 24.8
 * days). Node.js fires a longer timer at once, which would time out every command immediately.
 */
export function parseTimeout(text: string): number {
  const ms = parseDuration('--timeout', text);
  if (ms > MAX_TIMER_MS) {
    throw new CliError(`--timeout must be at most ${MAX_TIMER_MS} ms (about 24 days; got ${JSON.stringify(text)}, ${ms} ms)`, EXIT.usage);
  }
  return ms;
}

/**
 * `--artifact-ttl`: a duration as {@link parseDuration}, at most {@link MAX_DURATION_MS} (365
 * days), the longest `artifactTtlMs` the options accept: an age derived from a longer one is wrong.
 */
export function parseArtifactTtl(text: string): number {
  const ms = parseDuration('--artifact-ttl', text);
  if (ms > MAX_DURATION_MS) {
    throw new CliError(`--artifact-ttl must be at most 365 days, the longest artifactTtlMs the options accept (got ${JSON.stringify(text)})`, EXIT.usage);
  }
  return ms;
}

/**
 * Start of a report window in epoch ms: a duration back from `nowMs`, an ISO 8601 time, or
 * `all` for the whole log. An ISO date must exist in the calendar (`2026-02-30` is refused, not
 * read as 2 March) and a time must not be before 1970: stream IDs start there. A time without an
 * offset is UTC, as a date alone is and as the report prints times, never the host's zone: a cron
 * check's window must not move with `TZ`.
 */
export function parseSince(text: string, nowMs: number): number {
  if (text === 'all') return 0;
  const date = /^(\d{4})-(\d{2})-(\d{2})/.exec(text);
  if (date !== null) {
    const bad = (why: string) => new CliError(`--since ${JSON.stringify(text)} ${why}`, EXIT.usage);
    // A date and time without an offset, with `T` or a space between them (which Date.parse also
    // takes), is read as UTC.
    const iso = text.replace(/^(\d{4}-\d{2}-\d{2}) (?=\d)/, '$1T');
    const ms = Date.parse(/T[\d:.]+$/.test(iso) ? `${iso}Z` : iso);
    if (Number.isNaN(ms)) throw bad('is not a duration, an ISO 8601 time or "all"');
    const [year, month, day] = [Number(date[1]), Number(date[2]), Number(date[3])];
    const day0 = new Date(Date.UTC(year, month - 1, day));
    if (day0.getUTCFullYear() !== year || day0.getUTCMonth() !== month - 1 || day0.getUTCDate() !== day) {
      throw bad(`names a day that does not exist (${date[0]})`);
    }
    if (ms < 0) throw bad('is before 1970-01-01T00:00:00Z, where the dispatch log begins; use "all" for the whole log');
    return ms;
  }
  try {
    return Math.max(0, nowMs - parseDuration('--since', text));
  } catch {
    throw new CliError(
      `--since must be a duration back from now (90s, 15m, 1h, 7d), an ISO 8601 time (2026-12-07T09:00Z) or "all" (got ${JSON.stringify(text)})`,
      EXIT.usage,
    );
  }
}

/**
 * A count given on the command line: decimal digits only (no sign, exponent, hex or blank, all of
 * which `Number()` would take), at least `min`. Anything else is a usage error naming `option`.
 */
export function parseCount(option: string, text: string, min: 0 | 1): number {
  const n = /^\d+$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n) || n < min) {
    throw new CliError(
      `${option} must be a ${min === 0 ? 'non-negative' : 'positive'} whole number in decimal digits (got ${JSON.stringify(text)})`,
      EXIT.usage,
    );
  }
  return n;
}

/** Check a scope, step or job type as the guard would; a bad one is a usage error. */
export function checkId(kind: IdKind, value: string): string {
  asUsage(() => encodeId(kind, value));
  return value;
}

/** The keys of `--prefix` in `--namespace`, checked as the guard checks them. */
export function keysFor(options: Pick<CommonOptions, 'prefix' | 'namespace'>): FireOnceKeys {
  asUsage(() => checkKeyPrefix('--prefix', options.prefix));
  return new FireOnceKeys(options.prefix, checkId('namespace', options.namespace));
}

/** Run the guard's own check of an argument: what it refuses is a usage error, in its words. */
function asUsage(check: () => unknown): void {
  try {
    check();
  } catch (err) {
    throw new CliError((err as Error).message, EXIT.usage);
  }
}

/**
 * How to reach Redis: `--redis`, else `REDIS_URL`, else a local Redis on its default port (`source`
 * says which, for messages about a URL that is no use), giving up after `--timeout`.
 */
export function connectionOf(options: CommonOptions): ConnectOptions {
  const fromEnv = options.redis === undefined && process.env.REDIS_URL !== undefined;
  return {
    url: options.redis ?? process.env.REDIS_URL ?? DEFAULT_REDIS_URL,
    timeoutMs: parseTimeout(options.timeout),
    source: fromEnv ? 'REDIS_URL' : '--redis',
  };
}

/** The server's clock in epoch ms: stream IDs are stamped with it, not with ours. */
export async function serverTimeMs(redis: RedisClient): Promise<number> {
  return Math.floor((await redisTimeMicros(redis)) / 1_000);
}
