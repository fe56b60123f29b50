import { Redis } from 'ioredis';
import { FireOnceStoreUnavailable } from '../core/errors';
import { CliError, EXIT } from './exit-codes';

/** How the CLI reaches Redis. */
export interface ConnectOptions {
  /** `redis://[user:password@]host:port[/db]`, or `rediss://` for TLS. */
  readonly url: string;
  /** Applies to connecting and to every command. */
  readonly timeoutMs: number;
}

/** The URL with its password replaced by `***`, for messages. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '<unparsable URL>';
  }
}

/**
 * Connect, once, failing fast: no reconnect loop, no offline queue, and a timeout on the
 * connection and on every command, so an unreachable Redis ends the CLI with exit code 3 within
 * `timeoutMs` instead of hanging. TLS and ACL users come from the URL (`rediss://`,
 * `redis://user:password@host`), as ioredis reads them.
 */
export async function connect({ url, timeoutMs }: ConnectOptions): Promise<Redis> {
  let protocol: string;
  try {
    protocol = new URL(url).protocol;
  } catch {
    throw new CliError(`--redis must be a redis:// or rediss:// URL (got ${JSON.stringify(url)})`, EXIT.usage);
  }
  if (protocol !== 'redis:' && protocol !== 'rediss:') {
    throw new CliError(`--redis must be a redis:// or rediss:// URL (got ${JSON.stringify(redactUrl(url))})`, EXIT.usage);
  }
  const redis = new Redis(url, {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
    // No INFO ready check: an ACL user limited to its prefix may not run INFO; the PING below checks instead.
    enableReadyCheck: false,
  });
  let lastError: Error | undefined;
  redis.on('error', (err: Error) => {
    lastError = err;
  });
  try {
    await redis.connect();
    await redis.ping(); // surfaces a refused AUTH or a NOAUTH server here, not in the first real command
  } catch (err) {
    redis.disconnect();
    const reason = describeError(lastError ?? err);
    throw new CliError(`cannot use Redis at ${redactUrl(url)}: ${reason}`, EXIT.redis, { cause: err });
  }
  // A cluster node holds only its own slots: answering from it would report other scopes as
  // empty, or fail with MOVED. Refuse plainly instead.
  const info = await redis.info('cluster').catch(() => '');
  if (/^cluster_enabled:1/m.test(info)) {
    redis.disconnect();
    throw new CliError(
      `${redactUrl(url)} is a Redis Cluster node: the fire-once CLI reads a standalone Redis only (cluster support is not built yet)`,
      EXIT.usage,
    );
  }
  return redis;
}

/** True for errors that come from Redis or the connection to it, not from the CLI's own code. */
export function isRedisError(err: unknown): boolean {
  if (err instanceof FireOnceStoreUnavailable) return true; // the core guard's own wrapping of a Redis failure
  if (!(err instanceof Error)) return false;
  if (['ReplyError', 'MaxRetriesPerRequestError', 'AbortError', 'ParserError'].includes(err.name)) return true;
  return /Command timed out|Connection is closed|Stream isn't writeable|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOTFOUND|EHOSTUNREACH|EPIPE/.test(err.message);
}

function describeError(err: unknown): string {
  if (err instanceof AggregateError && err.errors.length > 0) return describeError(err.errors[0]);
  if (err instanceof Error) return err.message || err.name;
  return String(err);
}
