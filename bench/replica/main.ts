// The cost of replica sync: a primary with one replica, both spawned here, and the guard's fire and
// fast-forward paths with `replicaSync: false` and with the default ('auto', which finds the
// replica and pipelines WAIT behind every write), next to a bare SET NX PX and a bare SET NX PX
// with WAIT 1 pipelined behind it. Ratios are to the same repetition's bare SET NX PX, then the
// median over repetitions. Writes bench/out/replica.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadavg } from 'node:os';
import Table from 'cli-table3';
import { Command } from 'commander';
import { Redis } from 'ioredis';
import { FireOnceGuard } from '../../src';
import { startRedis } from '../../sample-workflows/services';
import { median, percentile } from '../cost/stats';
import { timeSerial } from '../cost/timing';
import { positiveInt } from '../shared/args';

const program = new Command('bench:replica')
  .description('Cost of replica sync (WAIT) with one replica, against a bare SET NX PX, in one run')
  .option('--ops <n>', 'decisions timed one at a time per path and repetition', positiveInt, 2000)
  .option('--reps <n>', 'repetitions, paths interleaved', positiveInt, 5)
  .option('--out <dir>', 'where replica.json goes', join(__dirname, '..', 'out'));

type Path = (i: number, rep: number) => Promise<unknown>;

async function main(): Promise<void> {
  const opts = program.parse(process.argv).opts<{ ops: number; reps: number; out: string }>();
  if (process.env.REDIS_URL) throw new Error('bench:replica spawns its own primary and replica: unset REDIS_URL');
  const primary = await startRedis();
  const { port } = new URL(primary.url);
  const replica = await startRedis({ extraArgs: ['--replicaof', '127.0.0.1', port] });
  const redis = new Redis(primary.url);
  try {
    while ((await redis.wait(1, 1_000)) < 1) process.stderr.write('waiting for the replica to acknowledge\n');
    const payload = Buffer.alloc(256, 'r');
    const guard = (replicaSync: false | 'auto') => new FireOnceGuard({ redis, keyPrefix: `bench-replica-${String(replicaSync)}`, replicaSync });
    const fire =
      (g: FireOnceGuard): Path =>
      async (i, rep) => {
        const outcome = await g.acquire({ scope: `fire-${rep}-${i}`, step: 'job', jobType: 'job' });
        if (outcome.kind !== 'acquired') throw new Error(`fire: ${outcome.kind}`);
        await g.commit(outcome.lease, payload);
      };
    const fastForward =
      (g: FireOnceGuard): Path =>
      async (i, rep) => {
        const outcome = await g.acquire({ scope: `fire-${rep}-${i}`, step: 'job', jobType: 'job' });
        if (outcome.kind !== 'fast-forward') throw new Error(`fast-forward: ${outcome.kind}`);
      };
    const [off, on] = [guard(false), guard('auto')];
    // Fire first: the fast-forward paths read the artifacts the fire paths wrote.
    const paths: Record<string, Path> = {
      'bare SET NX PX': (i, rep) => redis.set(`bench-replica-bare:${rep}:${i}`, 'token', 'PX', 60_000, 'NX'),
      'SET NX PX + WAIT 1 (pipelined)': (i, rep) => redis.pipeline().set(`bench-replica-wait:${rep}:${i}`, 'token', 'PX', 60_000, 'NX').wait(1, 500).exec(),
      'ours fire, replicaSync false': fire(off),
      "ours fire, replicaSync 'auto' (1 replica)": fire(on),
      'ours fast-forward, replicaSync false': fastForward(off),
      "ours fast-forward, replicaSync 'auto' (1 replica)": fastForward(on),
    };
    const p50s: Record<string, number[]> = Object.fromEntries(Object.keys(paths).map((name) => [name, []]));
    const ratios: Record<string, number[]> = Object.fromEntries(Object.keys(paths).map((name) => [name, []]));
    for (let rep = 0; rep < opts.reps; rep++) {
      const p50 = new Map<string, number>();
      for (const [name, path] of Object.entries(paths)) {
        await timeSerial(200, (i) => path(i + opts.ops, rep)); // warm-up, on keys of its own
        const samples = (await timeSerial(opts.ops, (i) => path(i, rep))).map((ns) => Number(ns) / 1000);
        p50.set(name, percentile(samples, 50));
      }
      const bare = p50.get('bare SET NX PX')!;
      for (const [name, us] of p50) {
        p50s[name].push(us);
        ratios[name].push(us / bare);
      }
      process.stderr.write(`rep ${rep + 1}/${opts.reps} done\n`);
    }
    const table = new Table({ head: ['path (one replica attached)', 'p50 µs (median of reps)', 'ratio to bare SET NX PX'] });
    for (const name of Object.keys(paths)) table.push([name, median(p50s[name]).toFixed(0), `${median(ratios[name]).toFixed(2)}x`]);
    const cost = (path: 'fire' | 'fast-forward') =>
      median(ratios[`ours ${path}, replicaSync 'auto' (1 replica)`]) / median(ratios[`ours ${path}, replicaSync false`]);
    process.stdout.write(`${table.toString()}\n`);
    process.stdout.write(`replica sync costs ${cost('fire').toFixed(2)}x on the fire path and ${cost('fast-forward').toFixed(2)}x on the fast-forward path\n`);
    mkdirSync(opts.out, { recursive: true });
    const report = { options: { ops: opts.ops, reps: opts.reps }, loadAverageAtEnd: loadavg(), p50s, ratios };
    writeFileSync(join(opts.out, 'replica.json'), `${JSON.stringify(report, null, 2)}\n`);
  } finally {
    redis.disconnect();
    await replica.stop();
    await primary.stop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
