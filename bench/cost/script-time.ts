// `npm run bench:cost:scripts -- [<folder B>] [ops] [rounds]`: Redis's own time per call of the
// protocol's hot scripts, from INFO commandstats, with the client's and the network's time left
// out. Each path runs on fresh keys after a CONFIG RESETSTAT, one call at a time: acquire.lua on a
// fresh step, commit.lua with a 256-byte payload, a fast-forward through acquire.lua, and the dispatch
// log (log-append.lua, batches of 80 entries of the plugin's shape, per entry), with a plain
// `SET NX PX` as the yardstick. A second folder of the same scripts (B) runs in alternating rounds
// with this checkout's (A), so a change to a script is weighed on the same server in one run. It
// spawns a redis-server of its own (REDIS_URL is not used: the bench resets and flushes it):
//   mkdir -p bench/out/scripts-a
//   for f in acquire commit log-append; do git show HEAD:src/core/scripts/$f.lua > bench/out/scripts-a/$f.lua; done
//   npm run bench:cost:scripts -- bench/out/scripts-a
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Table from 'cli-table3';
import { Redis } from 'ioredis';
import { eventFields } from '../../src/core/dispatch-log';
import { SCRIPTS_DIR } from '../../src/core/scripts';
import { spawnRedisServerOnFreePort } from '../../sample-workflows/services';
import { median } from './stats';

const [folderB, opsArg, roundsArg] = process.argv.slice(2);
const OPS = Number(opsArg ?? 3000);
const ROUNDS = Number(roundsArg ?? 5);
const LOG_BATCH = 80;
const PAYLOAD = `3::${'x'.repeat(256)}`;

type Shas = Record<'acquire' | 'commit' | 'logAppend', string>;
/** One path: issues `OPS` units of work; returns the command whose time counts and the units. */
type Path = (redis: Redis, shas: Shas, tag: string) => Promise<{ command: string; units: number }>;

const keysOf = (tag: string, i: number) => {
  const base = `st:v3:{default/${tag}-${i}}`;
  return { artifact: `${base}:a:step`, lock: `${base}:l:step`, waiters: `${base}:w:step`, wake: `${base}:wake` };
};
const token = (i: number) => `0193a5b2-7c1e-7d3f-9a1b-${String(i).padStart(12, '0')}`;

function acquire(redis: Redis, shas: Shas, tag: string, i: number, holder = ' wf/run/1'): Promise<unknown> {
  const k = keysOf(tag, i);
  return redis.evalsha(shas.acquire, 2, k.artifact, k.lock, token(i), 60_000, 'r', holder);
}

function commit(redis: Redis, shas: Shas, tag: string, i: number): Promise<unknown> {
  const k = keysOf(tag, i);
  return redis.evalsha(shas.commit, 3, k.artifact, k.lock, k.waiters, token(i), PAYLOAD, 3_600_000, k.wake);
}

const PATHS: Record<string, Path> = {
  'acquire.lua on a fresh step, per call': async (redis, shas, tag) => {
    for (let i = 0; i < OPS; i++) await acquire(redis, shas, tag, i);
    return { command: 'evalsha', units: OPS };
  },
  'commit.lua, per call': async (redis, shas, tag) => {
    for (let i = 0; i < OPS; i++) await acquire(redis, shas, tag, i);
    await redis.config('RESETSTAT');
    for (let i = 0; i < OPS; i++) await commit(redis, shas, tag, i);
    return { command: 'evalsha', units: OPS };
  },
  'fast-forward through acquire.lua, per call': async (redis, shas, tag) => {
    await acquire(redis, shas, tag, 0);
    await commit(redis, shas, tag, 0);
    await redis.config('RESETSTAT');
    for (let i = 0; i < OPS; i++) await acquire(redis, shas, tag, 0, ' wf/run/2');
    return { command: 'evalsha', units: OPS };
  },
  'dispatch log: log-append, per entry': async (redis, shas, tag) => {
    for (let b = 0; b < OPS / LOG_BATCH; b++) {
      const args: (string | number)[] = [100_000];
      for (let i = 0; i < LOG_BATCH; i++) {
        const base = { scope: `${tag}-${b}-${i}`, step: 'summarise', jobType: 'summary', workflowId: `wf-${b}-${i}`, runId: token(i), activityId: '1' };
        for (const decision of ['dispatched', 'committed'] as const) {
          const fields = eventFields({ ...base, decision, activityType: 'summarise', attempt: 1, holder: 'a1b2c3d4e5f6', fencingToken: 1764892800123456 });
          args.push(fields.length, ...fields);
        }
      }
      await redis.evalsha(shas.logAppend, 1, `st:v3:${tag}:log`, ...args);
    }
    return { command: 'evalsha', units: (OPS / LOG_BATCH) * LOG_BATCH * 2 };
  },
  'plain SET NX PX, per call': async (redis, _shas, tag) => {
    for (let i = 0; i < OPS; i++) await redis.set(`st:${tag}:set:${i}`, token(i), 'PX', 60_000, 'NX');
    return { command: 'set', units: OPS };
  },
};

async function load(redis: Redis, folder: string): Promise<Shas> {
  const read = (file: string) => readFileSync(join(folder, file), 'utf8');
  const [acquire, commit, logAppend] = await Promise.all(
    ['acquire.lua', 'commit.lua', 'log-append.lua'].map((f) => redis.script('LOAD', read(f)) as Promise<string>),
  );
  return { acquire, commit, logAppend };
}

/** Microseconds Redis spent in `command` since the last CONFIG RESETSTAT. */
async function usecOf(redis: Redis, command: string): Promise<number> {
  const line = (await redis.info('commandstats')).split('\n').find((l) => l.startsWith(`cmdstat_${command}:`));
  return Number(/usec=(\d+)/.exec(line ?? '')?.[1] ?? Number.NaN);
}

async function main(): Promise<void> {
  const folders: [string, string][] = [['A', SCRIPTS_DIR], ...(folderB === undefined ? [] : [['B', folderB] as [string, string]])];
  const usPerUnit = new Map<string, number[]>();
  // A server of its own, never REDIS_URL's: the paths reset its statistics and flush it.
  const server = await spawnRedisServerOnFreePort([]);
  const redis = new Redis(server.url);
  try {
    const shas = new Map(await Promise.all(folders.map(async ([name, folder]) => [name, await load(redis, folder)] as const)));
    for (let round = 0; round < ROUNDS; round++) {
      for (const [path, run] of Object.entries(PATHS)) {
        for (const [name] of round % 2 === 0 ? folders : [...folders].reverse()) {
          await redis.flushdb();
          await redis.config('RESETSTAT');
          const { command, units } = await run(redis, shas.get(name)!, `${name}${round}`);
          const key = `${path}\t${name}`;
          usPerUnit.set(key, [...(usPerUnit.get(key) ?? []), (await usecOf(redis, command)) / units]);
        }
      }
    }
  } finally {
    redis.disconnect();
    await server.stop();
  }
  const table = new Table({ head: ['path', 'scripts', 'median us', 'each round'] });
  for (const [key, values] of usPerUnit) table.push([...key.split('\t'), median(values).toFixed(2), values.map((v) => v.toFixed(2)).join(' ')]);
  console.log(`Redis time per unit from INFO commandstats; A = ${SCRIPTS_DIR}${folderB === undefined ? '' : `, B = ${folderB}`}; ${ROUNDS} rounds of ${OPS}`);
  console.log(table.toString());
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
