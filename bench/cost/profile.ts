// `npm run bench:cost:profile -- [ops] [rounds]`: only the fast-forward and the fire path of the
// public FireOnceGuard, next to a bare SET NX PX and a bare GET, under `node --cpu-prof` (the
// profile goes to bench/out/profile/). Prints p50 ratios to the SET and the client CPU per call,
// and the server's own time per command from `INFO commandstats`, all measured in this one run.
// The fire is also split: Powertools' two plain SETs (an in-progress record, then the result),
// and the guard's two scripts called alone, without the guard around them. So is another
// process's fast-forward (a step this guard has not seen, read by acquire.lua): a GET, a script
// that only GETs, acquire.lua by a plain EVALSHA, through the guard's script command, and the
// guard itself, taking turns op by op.
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { FireOnceGuard, PROTOCOL_SCRIPTS } from './library';
import { startRedis } from '../../sample-workflows/services';
import { unlinkMatching } from './memory';
import { summariseNs } from './stats';
import { timeInterleaved, timeSerial } from './timing';

/** Time `ops` serial calls and the client's CPU (user + system) per call, in microseconds. */
async function phase(ops: number, op: (i: number) => Promise<unknown>) {
  const cpu = process.cpuUsage();
  const samples = await timeSerial(ops, op);
  const used = process.cpuUsage(cpu);
  return { ...summariseNs(samples), cpuUs: (used.user + used.system) / ops };
}

const OPS = Number(process.argv[2] ?? 5000);
const ROUNDS = Number(process.argv[3] ?? 3);
const payload = Buffer.from('x'.repeat(256));
/** The artifact record commit.lua stores for `payload` with no args hash, as the guard sends it. */
const record = `3::${payload.toString()}`;
const script = (command: string) => {
  const found = PROTOCOL_SCRIPTS.find((s) => s.command === command);
  if (found === undefined) throw new Error(`no script ${command}`);
  return found as unknown as (redis: Redis, keys: string[], args: (string | number)[], buffers: boolean) => Promise<unknown>;
};
const acquire = script('fireOnceAcquireV3');
const acquireLua = PROTOCOL_SCRIPTS.find((s) => s.command === 'fireOnceAcquireV3')?.lua ?? '';
const commit = script('fireOnceCommitV3');

async function main(): Promise<void> {
  const service = await startRedis();
  const redis = new Redis(service.url);
  const admin = new Redis(service.url);
  const root = `profile-${process.pid}`;
  const guard = new FireOnceGuard({ redis, keyPrefix: root, lockTtlMs: 60_000, artifactTtlMs: 600_000 });
  const target = (i: number, r: number) => ({ scope: `s${r}.${i}`, step: 'dispatch', jobType: 'dispatch' });
  const acquireSha = (await redis.script('LOAD', acquireLua)) as string;
  const getSha = (await redis.script('LOAD', "return redis.call('GET', KEYS[1])")) as string;
  /** Another process's fast-forward of the steps round `r` committed, taken apart. */
  const otherSplit = async (r: number) => {
    const other = new FireOnceGuard({ redis, keyPrefix: root });
    const artifact = (i: number) => guard.keys.artifact(target(i, r).scope, 'dispatch');
    const lock = (i: number) => guard.keys.lock(target(i, r).scope, 'dispatch');
    const lanes: [string, (i: number) => Promise<unknown>][] = [
      ['GET', (i) => redis.getBuffer(artifact(i))],
      ['a script that only GETs', (i) => redis.callBuffer('EVALSHA', getSha, 1, artifact(i))],
      ['acquire.lua by EVALSHA', (i) => redis.callBuffer('EVALSHA', acquireSha, 2, artifact(i), lock(i), randomUUID(), 60_000, 'r', ' ')],
      ["the guard's script command", (i) => acquire(redis, [artifact(i), lock(i)], [randomUUID(), 60_000, 'r', ' '], true)],
      ['FireOnceGuard.acquire', (i) => other.acquire(target(i, r))],
    ];
    const samples = await timeInterleaved(
      OPS,
      lanes.map(([, op]) => op),
    );
    const get = summariseNs(samples[0]).p50Us;
    return lanes
      .map(([name], k) => `${name} ${summariseNs(samples[k]).p50Us.toFixed(0)} us (+${(summariseNs(samples[k]).p50Us - get).toFixed(0)})`)
      .join(' | ');
  };
  try {
    for (let r = 0; r < ROUNDS; r++) {
      const stats = async () => {
        const text = await admin.info('commandstats');
        await admin.config('RESETSTAT');
        return (cmd: string) => /usec_per_call=([\d.]+)/.exec(text.split('\n').find((l) => l.startsWith(`cmdstat_${cmd}:`)) ?? '')?.[1] ?? '-';
      };
      await stats();
      const set = await phase(OPS, (i) => redis.set(`${root}.set.${r}.${i}`, 'v', 'PX', 60_000, 'NX'));
      const get = await phase(OPS, (i) => redis.get(`${root}.set.${r}.${i}`));
      const plain = await stats();
      const fire = await phase(OPS, async (i) => {
        const outcome = await guard.acquire(target(i, r));
        if (outcome.kind !== 'acquired') throw new Error(`expected acquired, got ${outcome.kind}`);
        await guard.commit(outcome.lease, payload);
      });
      const fired = await stats();
      const twoSets = await phase(OPS, async (i) => {
        const key = `${root}.two.${r}.${i}`;
        await redis.set(key, 'in-progress', 'PX', 60_000, 'NX');
        await redis.set(key, record, 'PX', 600_000);
      });
      const scripts = await phase(OPS, async (i) => {
        const base = `${root}.raw.{${r}.${i}}`;
        const token = randomUUID();
        await acquire(redis, [`${base}:a`, `${base}:l`], [token, 60_000, 'r', ' '], true);
        await commit(redis, [`${base}:a`, `${base}:l`, `${base}:w`], [token, record, 600_000, `${base}:wake`], true);
      });
      await stats();
      const ff = await phase(OPS, async (i) => {
        const outcome = await guard.acquire(target(i, r));
        if (outcome.kind !== 'fast-forward') throw new Error(`expected fast-forward, got ${outcome.kind}`);
      });
      const forwarded = await stats();
      const split = await otherSplit(r);
      const row = (name: string, s: { p50Us: number; cpuUs: number }) => `${name} ${(s.p50Us / set.p50Us).toFixed(2)}x (client CPU ${s.cpuUs.toFixed(0)} us)`;
      process.stdout.write(
        `round ${r + 1}: SET p50 ${set.p50Us.toFixed(0)} us (client CPU ${set.cpuUs.toFixed(0)} us) | ${row('GET', get)} | ${row('fast-forward', ff)} | ${row('fire', fire)}\n` +
          `  fire split: ${row('two plain SETs', twoSets)} | ${row('the two scripts alone', scripts)}\n` +
          `  server usec/call: set ${plain('set')} get ${plain('get')} evalsha on fast-forward ${forwarded('evalsha')}, on fire (acquire + commit) ${fired('evalsha')}\n` +
          `  another process's fast-forward, p50: ${split}\n`,
      );
    }
  } finally {
    await unlinkMatching(admin, [`${root}*`]);
    redis.disconnect();
    admin.disconnect();
    await service.stop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
