/**
 * How the demo, the tests and the benches find Redis, each path run in a child process as a user
 * would meet it: REDIS_URL, redis-server on PATH, and (the demo only) redis-memory-server with a
 * system binary. The path that downloads and builds Redis needs the internet and is not run here;
 * the one that fails because it cannot download is, against a closed loopback port.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from '../../sample-workflows/services';
import { pathWithout, type StrippedPath } from '../support/path';
import { runScript, type ScriptRun } from '../support/scripts';

jest.setTimeout(300_000);

const SCRIPT = join('test', 'services', 'start-redis.ts');

interface Found {
  readonly url: string;
  readonly source: string;
  readonly spawned: boolean;
  readonly description: string;
  readonly pong: string;
}

function resultOf(run: ScriptRun): Found {
  const line = run.stdout.split('\n').find((l) => l.startsWith('RESULT '));
  if (run.code !== 0 || line === undefined) throw new Error(`start-redis exited ${run.code}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`);
  return JSON.parse(line.slice('RESULT '.length)) as Found;
}

function unavailableOf(run: ScriptRun): string {
  const line = run.stdout.split('\n').find((l) => l.startsWith('UNAVAILABLE '));
  if (run.code !== 2 || line === undefined) throw new Error(`expected no Redis, got exit ${run.code}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`);
  return line.slice('UNAVAILABLE '.length);
}

/** Does anything answer PING at `url`? */
async function answers(url: string): Promise<boolean> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

const systemRedisServer = execFileSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).trim();

describe('finding Redis', () => {
  let stripped: StrippedPath;
  let downloadDir: string;
  /** No REDIS_URL, no redis-server on PATH, and an empty redis-memory-server cache. */
  let bare: Record<string, string | undefined>;

  beforeAll(() => {
    stripped = pathWithout(['redis-server']);
    downloadDir = mkdtempSync(join(tmpdir(), 'fire-once-redisms-'));
    bare = { REDIS_URL: undefined, PATH: stripped.path, REDISMS_DOWNLOAD_DIR: downloadDir, REDISMS_SYSTEM_BINARY: undefined };
  });
  afterAll(() => {
    stripped.cleanup();
    rmSync(downloadDir, { recursive: true, force: true });
  });

  it('uses REDIS_URL when it is set, even for the demo', async () => {
    const found = resultOf(await runScript(SCRIPT, ['--embedded'], { REDIS_URL: process.env.REDIS_URL! }));
    expect(found).toEqual({ url: process.env.REDIS_URL, source: 'env', spawned: false, description: 'REDIS_URL', pong: 'PONG' });
  });

  it('spawns redis-server from PATH when REDIS_URL is unset', async () => {
    const found = resultOf(await runScript(SCRIPT, ['--embedded'], { REDIS_URL: undefined }));
    expect(found).toEqual({
      url: expect.stringMatching(/^redis:\/\/127\.0\.0\.1:\d+$/),
      source: 'path',
      spawned: true,
      description: `redis-server from PATH (${systemRedisServer})`,
      pong: 'PONG',
    });
    expect(await answers(found.url)).toBe(false); // stopped with the script
  });

  it('the demo: with neither, redis-memory-server runs the binary REDISMS_SYSTEM_BINARY names, and stops it', async () => {
    const run = await runScript(SCRIPT, ['--embedded'], { ...bare, REDISMS_SYSTEM_BINARY: systemRedisServer });
    const found = resultOf(run);
    expect(found).toEqual({
      url: expect.stringMatching(/^redis:\/\/127\.0\.0\.1:\d+$/),
      source: 'embedded',
      spawned: true,
      description: `embedded: redis-memory-server running ${systemRedisServer}`,
      pong: 'PONG',
    });
    expect(run.stdout).toContain(`redis-memory-server runs REDISMS_SYSTEM_BINARY=${systemRedisServer}`);
    expect(await answers(found.url)).toBe(false); // stopped with the script
  });

  it('the demo: with neither and no download possible, says every way to get a Redis', async () => {
    const closed = await freePort();
    const run = await runScript(SCRIPT, ['--embedded'], { ...bare, REDISMS_DOWNLOAD_MIRROR: `http://127.0.0.1:${closed}` });
    const message = unavailableOf(run);
    expect(message).toMatch(/^REDIS_URL is not set, redis-server is not on PATH, and redis-memory-server could not get or start one \(.*ECONNREFUSED/);
    expect(message).toContain('apt-get install -y redis-server');
    expect(message).toContain('brew install redis');
    expect(message).toContain('REDIS_URL=redis://127.0.0.1:6379');
    expect(message).toContain('needs the internet, make and a C compiler');
    expect(message).toContain('REDISMS_SYSTEM_BINARY');
  });

  it('the tests and benches: with neither, fail saying how to get Redis, and never fall back', async () => {
    const closed = await freePort();
    const offline = { ...bare, REDISMS_SYSTEM_BINARY: systemRedisServer, REDISMS_DOWNLOAD_MIRROR: `http://127.0.0.1:${closed}` };
    for (const args of [[], ['--global-setup']]) {
      const message = unavailableOf(await runScript(SCRIPT, args, offline));
      expect(message).toBe(
        'redis-server is not on PATH and REDIS_URL is not set. Install redis-server (Debian/Ubuntu: `apt-get install -y redis-server`; ' +
          'macOS: `brew install redis`), or start one with `docker compose up -d redis` and set REDIS_URL=redis://127.0.0.1:6379.',
      );
    }
  });

  it('npm run demo: with neither, runs on the embedded Redis, says so in one line, and leaves no server behind', async () => {
    const env = { ...bare, REDISMS_SYSTEM_BINARY: systemRedisServer, TEMPORAL_ADDRESS: process.env.TEMPORAL_ADDRESS! };
    const run = await runScript(join('sample-workflows', 'demo.ts'), [], env, 280_000);
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
    const services = run.stdout.split('\n').filter((line) => line.startsWith('services: '));
    expect(services).toEqual([
      expect.stringMatching(
        new RegExp(`^services: redis redis://127\\.0\\.0\\.1:\\d+ \\(embedded: redis-memory-server running ${systemRedisServer}\\), temporal `),
      ),
    ]);
    expect(run.stdout).toMatch(/│ guarded +│ 8 +│ 1 +│/);
    expect(await answers(/redis:\/\/[\d.]+:\d+/.exec(services[0])![0])).toBe(false);
  });
});
