import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { FireOnceStoreUnavailable } from '../core/errors';
import type { RedisClient } from '../core/scripts';
import { CliError, EXIT } from './exit-codes';
import { refuseSentinel } from './sentinel';

/** How the CLI reaches Redis. */
export interface ConnectOptions {
  /** `redis://[user:password@]host:port[/db]`, or `rediss://` for TLS. */
  readonly url: string;
  /** Applies to connecting and to every command. */
  readonly timeoutMs: number;
  /** Where `url` came from, named in usage errors: `--redis` unless said otherwise. */
  readonly source?: '--redis' | 'REDIS_URL';
}

/**
 * The URL with its password replaced by `***`, for messages. A URL whose credentials the WHATWG
 * parser does not see as such (no scheme, `redis:/` with one slash, a password holding `/`, `?`
 * or `#`) still has them before its last `@`: everything from after `scheme://` (or the start) to
 * that `@` is then `***`.
 */
export function redactUrl(url: string): string {
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (parsed !== undefined && parsed.password !== '' && !credentialsCutShort(parsed)) {
    parsed.password = '***';
    return parsed.toString();
  }
  return url.includes('@') ? url.replace(/^((?:[A-Za-z][A-Za-z0-9+.-]*:)?(?:\/\/)?)[^]*@/, '$1***@') : url;
}

/**
 * Whether an `@` is left after the host: a user name or password holding `/`, `?` or `#`, which
 * end a URL's host part, so the parser took the rest of them for the host, path or fragment.
 */
function credentialsCutShort(parsed: URL): boolean {
  return `${parsed.pathname}${parsed.search}${parsed.hash}`.includes('@');
}

/**
 * Connect, once, failing fast: no reconnect loop, no offline queue, and a timeout on the
 * connection and on every command, so an unreachable Redis ends the CLI with exit code 3 within
 * `timeoutMs` instead of hanging. TLS and ACL users come from the URL (`rediss://`,
 * `redis://user:password@host`), as ioredis reads them. A URL that names a node of a Redis
 * Cluster gets an ioredis `Cluster` on that node as its seed, so that every command reaches the
 * node that owns its key.
 */
export async function connect(connection: ConnectOptions): Promise<RedisClient> {
  const { url, timeoutMs } = connection;
  const redis = await connectNode(connection);
  // INFO may be denied to an ACL user: then the server is taken as standalone.
  const info = await redis.info('cluster').catch(() => '');
  if (!/^cluster_enabled:1/m.test(info)) return redis;
  const { host, port, username, password, tls } = redis.options;
  redis.disconnect();
  return connected(url, () => {
    const cluster = new Cluster([{ host, port }], {
      lazyConnect: true,
      enableOfflineQueue: false,
      enableReadyCheck: true, // CLUSTER INFO: resolves once the cluster state is ok
      clusterRetryStrategy: () => null,
      slotsRefreshTimeout: timeoutMs,
      redisOptions: { ...nodeOptions(timeoutMs), username, password, tls },
    });
    return { client: cluster, ready: cluster.connect().then(() => pinged(cluster)) };
  });
}

/**
 * Connect to the one node that `url` names, as {@link connect} does, without following a
 * Cluster: for `doctor`, which must reach the nodes of an unhealthy cluster too.
 */
export function connectNode({ url, timeoutMs, source = '--redis' }: ConnectOptions): Promise<Redis> {
  const notAUrl = () => new CliError(`${source} must be a redis:// or rediss:// URL (got ${JSON.stringify(redactUrl(url))})`, EXIT.usage);
  // An `@` the parser did not take as the end of the user and password (a password holding `/`,
  // `?` or `#`) leaves them in the host, port, path, query or fragment, which the messages below
  // quote: refuse it here, with everything before the last `@` as `***`, naming the fix when a
  // `/`, `?` or `#` stands between `scheme://` and that `@`.
  const cutShort = () =>
    /^rediss?:\/\/[^]*[/?#][^]*@/i.test(url)
      ? new CliError(
          `${source}: its user name or password holds a / ? or # (${redactUrl(url)}), which ends the host part of a URL: percent-encode it (%2F, %3F, %23)`,
          EXIT.usage,
        )
      : notAUrl();
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    const port = /^rediss?:\/\/[^/@]*:(\d+)(?:[/?#]|$)/i.exec(url)?.[1];
    if (port !== undefined && Number(port) > 65535) throw new CliError(`${source}: port ${port} is out of range (1 to 65535)`, EXIT.usage);
    throw url.includes('@') ? cutShort() : notAUrl();
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') throw notAUrl();
  if (url.includes('@') && ((parsed.username === '' && parsed.password === '') || credentialsCutShort(parsed))) throw cutShort();
  // ioredis decodes them with decodeURIComponent, which throws on a % that starts no escape.
  if (![parsed.username, parsed.password].every(decodable)) {
    throw new CliError(`${source}: its user name or password holds a % that starts no escape (${redactUrl(url)}): write a % as %25`, EXIT.usage);
  }
  // ioredis reads every query parameter as a client option, over the CLI's own: `?keyPrefix=x:`
  // would prefix every key the CLI touches but not the keys it prints or SCANs for, and `?db=abc`
  // crashes it. The URL form the CLI documents has none.
  if (parsed.search !== '') {
    throw new CliError(
      `${source} takes no query string: ioredis would read its parameters (${[...parsed.searchParams.keys()].map((k) => JSON.stringify(k)).join(', ')}) as client options; use redis://[user:password@]host:port[/db]`,
      EXIT.usage,
    );
  }
  // ioredis reads the database with parseInt: `/abc` crashes it with an uncaught error, `/1x` is database 1.
  if (!/^(?:\/\d*)?$/.test(parsed.pathname)) {
    throw new CliError(
      `${source} must name its database as digits (redis://host:port/0), not ${JSON.stringify(parsed.pathname)} (in ${redactUrl(url)})`,
      EXIT.usage,
    );
  }
  return connected(url, () => {
    const client = new Redis(url, nodeOptions(timeoutMs));
    return {
      client,
      ready: client
        .connect()
        .then(() => pinged(client))
        .then(() => refuseSentinel(client, redactUrl(url), source))
        .then(() => selected(client, url)),
    };
  });
}

function decodable(text: string): boolean {
  try {
    decodeURIComponent(text);
    return true;
  } catch {
    return false;
  }
}

/** Another node of the deployment `seed` is connected to, with the seed's user, password and TLS. */
export function connectPeer(seed: Redis, address: { readonly host: string; readonly port: number }, timeoutMs: number): Promise<Redis> {
  const { username, password, tls } = seed.options;
  const url = `${tls ? 'rediss' : 'redis'}://${address.host}:${address.port}`;
  return connected(url, () => {
    const client = new Redis({ ...nodeOptions(timeoutMs), host: address.host, port: address.port, username, password, tls });
    return { client, ready: client.connect().then(() => pinged(client)) };
  });
}

/**
 * PING, to surface a refused AUTH or a NOAUTH server at once. A NOPERM reply counts as an answer:
 * the user is logged in and only lacks +ping (a worker's least-privilege user does, and `doctor`
 * must be able to run as it); the command that needs a denied permission reports it.
 */
async function pinged(client: Redis | Cluster): Promise<void> {
  await client.ping().catch((err: Error) => {
    if (!/^NOPERM/.test(err.message)) throw err;
  });
}

/**
 * SELECT the URL's database again, and wait for the answer. ioredis sends the SELECT itself on
 * connecting, but reports its failure only as an `error` event and goes on with database 0: a URL
 * naming a database the server does not have (`/99`) would then read and delete database 0's keys.
 */
async function selected(client: Redis, url: string): Promise<void> {
  const { db } = client.options;
  if (!db) return;
  await client.select(db).catch((err: Error) => {
    // A node of a Cluster refuses it: the URL is wrong (exit 2), not Redis unreachable (exit 3).
    if (/SELECT is not allowed in cluster mode/.test(err.message)) {
      throw new CliError(`${redactUrl(url)} names database ${db}, but a Redis Cluster has database 0 only`, EXIT.usage);
    }
    throw err;
  });
}

function nodeOptions(timeoutMs: number): RedisOptions {
  return {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
    // No INFO ready check: an ACL user limited to its prefix may not run INFO; the PING below checks instead.
    enableReadyCheck: false,
    // On disconnecting, ioredis waits this long for the server to close its end before it destroys
    // the socket (2 s by default). A host that never answers never closes either: the wait came
    // once before a timed-out connect failed and again, holding the process open, after the CLI
    // had said so. The CLI has nothing in flight when it disconnects.
    disconnectTimeout: 0,
  };
}

/** Open a client, turning any failure to reach or use it into exit code 3 with a plain reason. */
async function connected<C extends RedisClient>(url: string, open: () => { client: C; ready: Promise<unknown> }): Promise<C> {
  const { client, ready } = open();
  let lastError: Error | undefined;
  client.on('error', (err: Error) => {
    lastError = err;
  });
  try {
    await ready; // the PING surfaces a refused AUTH or a NOAUTH server here, not in the first real command
    return client;
  } catch (err) {
    client.disconnect();
    if (err instanceof CliError) throw err; // the CLI's own refusal (a sentinel), with its exit code
    const reason = describeError(lastError ?? err);
    throw new CliError(`cannot use Redis at ${redactUrl(url)}: ${reason}`, EXIT.redis, { cause: err });
  }
}

/**
 * True for errors that come from Redis or the connection to it, not from the CLI's own code. A
 * {@link CliError} already carries its exit code: its message may quote a scope or step that reads
 * like a connection error (`ECONNREFUSED`), or a connection failure already described.
 */
export function isRedisError(err: unknown): boolean {
  if (err instanceof CliError) return false;
  if (err instanceof FireOnceStoreUnavailable) return true; // the core guard's own wrapping of a Redis failure
  if (!(err instanceof Error)) return false;
  if (['ReplyError', 'MaxRetriesPerRequestError', 'AbortError', 'ParserError'].includes(err.name)) return true;
  return /Command timed out|Connection is closed|Stream isn't writeable|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOTFOUND|EHOSTUNREACH|EPIPE/.test(err.message);
}

/**
 * A Redis failure during a command, exit 3. A permission refused gets the way to the fix: inside a
 * script Redis names no command ("can't run this command or subcommand"), and `doctor` lists
 * what the user lacks as an `ACL SETUSER` line.
 */
export function redisFailure(url: string, prefix: string, err: unknown): CliError {
  const message = (err as Error).message;
  const refused = /NOPERM|can't run this command|no permissions to access|can't publish to the channel/.test(message);
  const fix = refused
    ? `; the user lacks a permission the CLI needs: grant what docs/operating.md names, or run fire-once doctor --prefix ${prefix} to list it`
    : '';
  return new CliError(`Redis at ${redactUrl(url)} failed: ${message}${fix}`, EXIT.redis, { cause: err });
}

/**
 * Run `remove`, a delete of `key`. Redis may have run it although its answer came too late (past
 * `--timeout`) or the connection failed under it: then `key` is read again (its answer, on the same
 * connection, comes after the delete's, within another `--timeout`), and if it is gone the
 * delete counts as done, so that the caller records it in the dispatch log. If it is still there
 * (for a lock, even with another value: a compare-and-delete refused deletes nothing), the error
 * stands, saying the delete may have run or may still run. An error Redis answered (NOPERM, say)
 * stands as it is: that delete never runs.
 */
export async function deleted(redis: RedisClient, key: string, remove: () => Promise<unknown>): Promise<unknown> {
  try {
    return await remove();
  } catch (err) {
    // The guard's own timeout (late), or the client's, which the guard passes on as its message.
    const unanswered =
      (err instanceof FireOnceStoreUnavailable && err.late !== undefined) ||
      (isRedisError(err) && /Command timed out|Connection is closed|ECONNRESET|EPIPE/.test((err as Error).message));
    if (!unanswered) throw err;
    // On the same connection, so that its answer comes after the delete's: one Redis ran first.
    if ((await redis.exists(key).catch(() => 1)) === 0) return undefined;
    (err as Error).message += `: whether the delete of ${key} ran is unknown (it may still run when Redis answers); check with fire-once inspect`;
    throw err;
  }
}

function describeError(err: unknown): string {
  if (err instanceof AggregateError && err.errors.length > 0) return describeError(err.errors[0]);
  if (err instanceof Error) return err.message || err.name;
  return String(err);
}
