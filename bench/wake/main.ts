// Wake-up latency after a commit: how long a waiter takes to see the holder's artifact, woken by
// pub/sub versus polling alone, measured side by side in one run on one redis-server started
// here. Prints p50/p99 of both and their ratio; writes bench/out/wake.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import Table from 'cli-table3';
import { Command } from 'commander';
import { positiveInt } from '../shared/args';
import { Redis } from 'ioredis';
import { FireOnceGuard } from '../../src';
import { WakeHub, waitForTurn } from '../../src/core';
import { startRedis } from '../../sample-workflows/services';

const program = new Command('bench:wake')
  .description('Wake-up latency after commit: pub/sub against polling, in one run')
  .option('--samples <n>', 'commits timed per mode and repetition', positiveInt, 200)
  .option('--reps <n>', 'repetitions, modes interleaved', positiveInt, 5)
  .option('--poll-ms <n>', 'the poll interval (the fallback with pub/sub)', positiveInt, 250)
  .option('--out <dir>', 'where wake.json goes', join(__dirname, '..', 'out'));

/** One timed wake-up: commit at t0, the waiter's outcome at t1. */
async function sample(guard: FireOnceGuard, hub: WakeHub | undefined, pollMs: number, scope: string): Promise<number> {
  const target = { scope, step: 'job', jobType: 'job' };
  const holder = await guard.acquire(target);
  const held = await guard.acquire(target);
  if (holder.kind !== 'acquired' || held.kind !== 'held') throw new Error('setup: expected one holder and one waiter');
  let committedAt = 0;
  const waiting = waitForTurn(guard, target, held, {}, { pollIntervalMs: pollMs, deadline: Date.now() + 60_000, wake: hub }).then(() => performance.now());
  // Let the waiter subscribe and start sleeping, at a random phase of its poll.
  await new Promise((r) => setTimeout(r, 20 + Math.random() * pollMs));
  committedAt = performance.now();
  await guard.commit(holder.lease, Buffer.from('artifact'));
  return (await waiting) - committedAt;
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

async function main(): Promise<void> {
  const opts = program.parse(process.argv).opts<{ samples: number; reps: number; pollMs: number; out: string }>();
  const service = await startRedis();
  const redis = new Redis(service.url);
  const prefix = `bench-wake-${randomBytes(4).toString('hex')}`;
  const guard = new FireOnceGuard({ redis, keyPrefix: prefix });
  const hub = new WakeHub(redis);
  const results: Record<'pubsub' | 'poll', number[]> = { pubsub: [], poll: [] };
  try {
    for (let rep = 1; rep <= opts.reps; rep++) {
      for (const mode of rep % 2 ? (['pubsub', 'poll'] as const) : (['poll', 'pubsub'] as const)) {
        process.stderr.write(`[bench:wake] rep ${rep}/${opts.reps} ${mode}\n`);
        for (let i = 0; i < opts.samples; i++) {
          results[mode].push(await sample(guard, mode === 'pubsub' ? hub : undefined, opts.pollMs, `${mode}-${rep}-${i}`));
        }
      }
    }
  } finally {
    hub.close();
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      if (keys.length) await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
    redis.disconnect();
    await service.stop();
  }
  const summary = Object.fromEntries(
    Object.entries(results).map(([mode, values]) => {
      const sorted = [...values].sort((a, b) => a - b);
      return [mode, { samples: sorted.length, p50: percentile(sorted, 50), p99: percentile(sorted, 99) }];
    }),
  ) as Record<'pubsub' | 'poll', { samples: number; p50: number; p99: number }>;
  const table = new Table({ head: ['wake-up', 'samples', 'p50 ms', 'p99 ms', 'p50 vs poll'], style: { head: [], border: [] } });
  for (const mode of ['pubsub', 'poll'] as const) {
    const s = summary[mode];
    table.push([
      mode === 'pubsub' ? `pub/sub (poll ${opts.pollMs} ms fallback)` : `poll every ${opts.pollMs} ms`,
      s.samples,
      s.p50.toFixed(2),
      s.p99.toFixed(2),
      (s.p50 / summary.poll.p50).toFixed(3),
    ]);
  }
  console.log(`\nWake-up latency after commit (${opts.reps} repetitions x ${opts.samples} commits per mode, interleaved)\n`);
  console.log(table.toString());
  mkdirSync(opts.out, { recursive: true });
  writeFileSync(join(opts.out, 'wake.json'), JSON.stringify({ options: opts, summary }, null, 2));
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
