// `npm run bench:cost:ab -- <build A> <build B> [ops] [rounds]`: two compiled builds of the package
// (directories as `npm run build` writes dist/) side by side in one process, on one redis-server,
// with a bare SET NX PX and a bare GET between them. Every lane takes its turn op by op
// (timeInterleaved), so the two builds meet the same moments of a noisy machine; a change of a
// microsecond or two shows here, where a whole `bench:cost` run cannot resolve it. Paths: a fresh
// fire (acquire + commit), a fast-forward by the guard that committed the step, and one by a guard
// that has not seen it. A build must sit inside the repository, to find its dependencies in
// node_modules/. For example, to weigh a change against the last commit:
//   git stash && npm run build && rm -rf bench/out/build-a && cp -r dist bench/out/build-a
//   git stash pop && npm run build && npm run bench:cost:ab -- bench/out/build-a dist
import { resolve } from 'node:path';
import { randomUUID } from 'node:crypto';
import Table from 'cli-table3';
import { Redis } from 'ioredis';
import type { FireOnceGuard as Guard } from '../../src';
import { startRedis } from '../../sample-workflows/services';
import { unlinkMatching } from './memory';
import { summariseNs } from './stats';
import { timeInterleaved } from './timing';

const [buildA, buildB] = process.argv.slice(2, 4);
if (buildA === undefined || buildB === undefined) {
  console.error('usage: bench:cost:ab -- <build A> <build B> [ops] [rounds]');
  process.exit(2);
}
const OPS = Number(process.argv[4] ?? 4000);
const ROUNDS = Number(process.argv[5] ?? 3);
const payload = Buffer.from('x'.repeat(256));

function load(build: string): typeof Guard {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a build chosen at run time
  return (require(resolve(build, 'index.js')) as { FireOnceGuard: typeof Guard }).FireOnceGuard;
}

async function main(): Promise<void> {
  const service = await startRedis();
  const redis = new Redis(service.url);
  const root = `ab-${process.pid}`;
  const builds = { A: load(buildA), B: load(buildB) };
  const samples = new Map<string, bigint[]>();
  for (let round = 0; round < ROUNDS; round++) {
    const guards = Object.entries(builds).map(([name, FireOnceGuard]) => {
      const keyPrefix = `${root}-${round}-${name}`;
      return { name, guard: new FireOnceGuard({ redis, keyPrefix }), other: new FireOnceGuard({ redis, keyPrefix }) };
    });
    const target = (i: number) => ({ scope: `s${i}`, step: 'dispatch', jobType: 'dispatch' });
    const fire = (guard: Guard) => async (i: number) => {
      const outcome = await guard.acquire(target(i));
      if (outcome.kind !== 'acquired') throw new Error(`expected acquired, got ${outcome.kind}`);
      await guard.commit(outcome.lease, payload);
    };
    const fastForward = (guard: Guard) => async (i: number) => {
      const outcome = await guard.acquire(target(i));
      if (outcome.kind !== 'fast-forward') throw new Error(`expected fast-forward, got ${outcome.kind}`);
    };
    const set = (path: string) => (i: number) => redis.set(`${root}-${round}-set-${path}-${i}`, randomUUID(), 'PX', 60_000, 'NX');
    const get = (i: number) => redis.getBuffer(guards[0].guard.keys.artifact(`s${i}`, 'dispatch'));
    const paths: [string, ((i: number) => Promise<unknown>)[], string[]][] = [
      ['fire', [...guards.map(({ guard }) => fire(guard)), set('fire')], [...guards.map(({ name }) => name), 'SET']],
      ['fast-forward', [...guards.map(({ guard }) => fastForward(guard)), set('ff'), get], [...guards.map(({ name }) => name), 'SET', 'GET']],
      [
        "another guard's fast-forward",
        [...guards.map(({ other }) => fastForward(other)), set('other'), get],
        [...guards.map(({ name }) => name), 'SET', 'GET'],
      ],
    ];
    for (const [path, lanes, names] of paths) {
      const timed = await timeInterleaved(OPS, lanes);
      names.forEach((name, lane) => samples.set(`${path}\t${name}`, [...(samples.get(`${path}\t${name}`) ?? []), ...timed[lane]]));
    }
    await unlinkMatching(redis, [`${root}-${round}-*`]);
  }
  console.log(`A = ${buildA}, B = ${buildB}: ${ROUNDS} rounds of ${OPS} ops per path, lanes interleaved`);
  const table = new Table({ head: ['path', 'lane', 'p50 us', 'p99 us'] });
  for (const [key, ns] of samples) {
    const { p50Us, p99Us } = summariseNs(ns);
    table.push([...key.split('\t'), p50Us.toFixed(1), p99Us.toFixed(1)]);
  }
  console.log(table.toString());
  redis.disconnect();
  await service.stop();
}

void main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
