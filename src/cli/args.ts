import { DEFAULT_NAMESPACE, FireOnceKeys, KEY_PREFIX_PATTERN, encodeId, type IdKind } from '../core/keys';
import type { RedisClient } from '../core/scripts';
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

/** The key prefix the guard uses when none is configured, as in `GUARD_DEFAULTS`. */
export const DEFAULT_PREFIX = 'fire-once';
/** The Temporal namespace the CLI reads and writes when `--namespace` is not given. */
export { DEFAULT_NAMESPACE };
/** Where the CLI looks for Redis when neither `--redis` nor `REDIS_URL` says. */
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

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
 * Start of a report window in epoch ms: a duration back from `nowMs`, an ISO 8601 time, or
 * `all` for the whole log.
 */
export function parseSince(text: string, nowMs: number): number {
  if (text === 'all') return 0;
  if (/^\d{4}-\d{2}-\d{2}/.test(text)) {
    const ms = Date.parse(text);
    if (Number.isNaN(ms)) throw new CliError(`--since must be a duration, an ISO 8601 time or "all" (got ${JSON.stringify(text)})`, EXIT.usage);
    return ms;
  }
  return Math.max(0, nowMs - parseDuration('--since', text));
}

/** Check a scope, step or job type as the guard would; a bad one is a usage error. */
export function checkId(kind: IdKind, value: string): string {
  try {
    encodeId(kind, value);
  } catch (err) {
    throw new CliError((err as Error).message, EXIT.usage);
  }
  return value;
}

/** The keys of `--prefix` in `--namespace`, checked as the guard checks them. */
export function keysFor(options: Pick<CommonOptions, 'prefix' | 'namespace'>): FireOnceKeys {
  if (!KEY_PREFIX_PATTERN.test(options.prefix)) {
    throw new CliError(
      `--prefix must be 1-64 characters of [A-Za-z0-9._:-], starting with a letter or digit (got ${JSON.stringify(options.prefix)})`,
      EXIT.usage,
    );
  }
  return new FireOnceKeys(options.prefix, checkId('namespace', options.namespace));
}

/** `--redis`, else `REDIS_URL`, else a local Redis on its default port. */
export function redisUrlOf(options: CommonOptions): string {
  return options.redis ?? process.env.REDIS_URL ?? DEFAULT_REDIS_URL;
}

/** The server's clock in epoch ms: stream IDs are stamped with it, not with ours. */
export async function serverTimeMs(redis: RedisClient): Promise<number> {
  const [seconds, micros] = (await redis.time()) as (string | number)[];
  return Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000);
}
