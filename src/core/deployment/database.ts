import type { Redis } from 'ioredis';
import { FireOnceConfigError } from '../errors';
import { isCluster, type RedisClient } from '../scripts';
import { addressOf } from './nodes';
import { withinTimeout } from './timeout';

/**
 * Refuse a client that names a database (`redis://host:port/3`, `db: 3`) it is not in. ioredis
 * sends the `SELECT` itself on connecting, but reports a refusal (a database the server does not
 * have, an ACL user without `+select`) only as an `error` event and goes on in database 0, where
 * another deployment's locks and results may be. `SELECT`ing the same database again is a no-op
 * when the first one took; when it did not, this one is refused the same way. The database is the
 * one the client is in as ioredis tracks it, the last it sent a `SELECT` for (which it re-sends on
 * reconnecting), not `options.db`: a caller that switched databases by hand after connecting
 * stays where it switched to. A Cluster has database 0 only, and ioredis refuses a `db` there itself.
 */
export async function checkSelectedDatabase(redis: RedisClient, timeoutMs: number): Promise<void> {
  if (isCluster(redis)) return;
  const db = selectedDatabase(redis);
  if (!db) return;
  const refusal = await withinTimeout(redis, timeoutMs, { what: `database ${db} was selected`, noun: `database ${db}` }, () =>
    redis.select(db).then(
      () => undefined,
      (err: unknown) => {
        if (err instanceof Error && err.name === 'ReplyError') return err;
        throw err;
      },
    ),
  );
  if (refusal === undefined) return;
  throw new FireOnceConfigError(
    `the Redis client names database ${db}, which Redis at ${addressOf(redis)} refused (${refusal.message.trim()}): ioredis went on in database 0, ` +
      `where other deployments' locks and results may be. Name a database the server has (0 to its \`databases\` setting less one), or grant the user +select`,
    {},
    { cause: refusal },
  );
}

/**
 * The database ioredis keeps the client in: the last one it sent a `SELECT` for, `options.db` at
 * first. ioredis holds it in `condition.select` (it sets it as it sends a `SELECT`, and its
 * tracing reads it the same way), which its types do not declare; `options.db` when it is absent.
 */
function selectedDatabase(redis: Redis): number | undefined {
  const { condition } = redis as unknown as { condition?: { select?: unknown } };
  return typeof condition?.select === 'number' ? condition.select : redis.options.db;
}
