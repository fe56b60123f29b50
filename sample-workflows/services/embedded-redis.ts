/**
 * The demo's last resort for Redis: redis-memory-server, a devDependency of this repository (a
 * library user installing `temporal-fire-once` never gets it). It runs a `redis-server` it
 * obtains in this order:
 *
 * 1. `REDISMS_SYSTEM_BINARY` (or `redisMemoryServer.systemBinary` in package.json): that binary;
 * 2. a binary it built before, cached in `node_modules/.cache/redis-memory-server`;
 * 3. otherwise it downloads the Redis source (`stable`, or `REDISMS_VERSION`) and builds it with
 *    `make`, which needs the internet, make and a C compiler, and a few minutes, once.
 *
 * `npm install` does not build anything: package.json sets `redisMemoryServer.disablePostinstall`,
 * so the download happens here, and only when the demo finds no other Redis.
 */
import { ServiceUnavailableError } from './errors';
import { HOW_TO_GET_REDIS, ping, type RedisService } from './redis';

/** Everything that gets the demo a Redis, for the message when none of it worked. */
export const HOW_TO_GET_REDIS_FOR_THE_DEMO =
  `${HOW_TO_GET_REDIS} Or let the demo build one: it needs the internet, make and a C compiler ` +
  '(Debian/Ubuntu: `apt-get install -y build-essential`; macOS: `xcode-select --install`), once. ' +
  'Or point REDISMS_SYSTEM_BINARY at a redis-server binary.';

/** What {@link startEmbeddedRedis} needs. */
export interface EmbeddedRedisOptions {
  readonly extraArgs: readonly string[];
  readonly progress: (line: string) => void;
}

/**
 * Start a `redis-server` through redis-memory-server on a free loopback port, with no
 * persistence. `stop()` stops it (and the watchdog process the package starts with it). Throws
 * {@link ServiceUnavailableError} naming the cause and everything that would get a Redis.
 */
export async function startEmbeddedRedis(options: EmbeddedRedisOptions): Promise<RedisService> {
  let RedisMemoryServer: typeof import('redis-memory-server').RedisMemoryServer;
  try {
    ({ RedisMemoryServer } = await import('redis-memory-server'));
  } catch (err) {
    throw new ServiceUnavailableError(
      `REDIS_URL is not set, redis-server is not on PATH, and redis-memory-server is not installed ` +
        `(${firstLine(err)}; run \`npm install\` in this repository). ${HOW_TO_GET_REDIS_FOR_THE_DEMO}`,
    );
  }
  const systemBinary = process.env.REDISMS_SYSTEM_BINARY;
  options.progress(
    systemBinary
      ? `redis: REDIS_URL is not set and redis-server is not on PATH; redis-memory-server runs REDISMS_SYSTEM_BINARY=${systemBinary}`
      : 'redis: REDIS_URL is not set and redis-server is not on PATH; redis-memory-server gets one ' +
          '(the first time it downloads and builds Redis: a few minutes, needs the internet, make and a C compiler)',
  );
  const server = new RedisMemoryServer({ instance: { ip: '127.0.0.1', args: [...options.extraArgs] }, autoStart: false });
  try {
    await server.start();
  } catch (err) {
    await server.stop().catch(() => undefined);
    throw new ServiceUnavailableError(
      `REDIS_URL is not set, redis-server is not on PATH, and redis-memory-server could not get or start one ` +
        `(${firstLine(err)}). ${HOW_TO_GET_REDIS_FOR_THE_DEMO}`,
    );
  }
  const info = server.getInstanceInfo();
  if (info === false) throw new ServiceUnavailableError(`redis-memory-server reported no running instance. ${HOW_TO_GET_REDIS_FOR_THE_DEMO}`);
  const url = `redis://${info.ip}:${info.port}`;
  const binary = info.childProcess?.spawnfile ?? 'redis-server';
  try {
    await ping(url, `redis-memory-server started ${binary} but it does not answer PING on ${url}. ${HOW_TO_GET_REDIS_FOR_THE_DEMO}`);
  } catch (err) {
    await server.stop();
    throw err;
  }
  return {
    url,
    spawned: true,
    source: 'embedded',
    description: `embedded: redis-memory-server running ${binary}`,
    stop: async () => {
      await server.stop();
    },
  };
}

/** The first line of an error's message, short enough for a one-line cause. */
function firstLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  const line = text.split('\n').find((l) => l.trim() !== '') ?? text;
  return line.length > 200 ? `${line.slice(0, 200)}...` : line;
}
