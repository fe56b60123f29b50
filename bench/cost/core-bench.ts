import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { countRoundTrips, type RoundTrips } from './count-round-trips';
import { GUARDS, LOCK_TTL_MS, UnexpectedRunError, type GuardFactory, type GuardUnderTest } from './guards';
import { memoryPerStep, unlinkMatching, type StepMemory } from './memory';
import { median, summariseNs, type LatencySummary } from './stats';
import { opsPerSecond, timeSerial } from './timing';

/** How much the core bench does. */
export interface CoreOptions {
  readonly reps: number;
  /** Decisions timed one at a time, per path, guard and repetition. */
  readonly latencyOps: number;
  /** Decisions per throughput run, per guard and repetition. */
  readonly throughputOps: number;
  readonly concurrency: number;
  /** Committed steps whose keys `MEMORY USAGE` measures, per guard. */
  readonly memorySteps: number;
  /** Decisions per path whose round trips are counted, per guard. */
  readonly roundTripSamples: number;
  /** The dispatch's result, stored as the artifact. */
  readonly payload: string;
  readonly progress: (line: string) => void;
}

/** Medians over repetitions of one path's latency, and of its ratios to the bare SET NX PX. */
export interface PathLatency {
  readonly p50Us: number;
  readonly p99Us: number;
  readonly p50Ratio: number;
  readonly p99Ratio: number;
}

/** Everything the core bench found about one guard. */
export interface GuardCost {
  readonly id: string;
  readonly name: string;
  readonly settings: string;
  readonly roundTrips: RoundTrips;
  /** A fresh step: artifact check, lock, a no-op dispatch, commit. */
  readonly fire: PathLatency;
  /** A committed step: the decision that finds the artifact, by the guard that committed it. */
  readonly fastForward: PathLatency;
  /** The same, by another instance of the guard (another process), which has seen nothing yet. */
  readonly fastForwardOther: PathLatency;
  /** Fresh steps at `concurrency`, median over repetitions; `ratio` is to the bare SET's rate. */
  readonly throughput: { readonly opsPerSec: number; readonly ratio: number };
  readonly memory: StepMemory;
}

/** What one repetition measured, kept raw in the JSON. */
export interface RepSample {
  readonly baseline: { readonly c1: LatencySummary; readonly opsPerSec: number };
  readonly guards: Record<
    string,
    { readonly fire: LatencySummary; readonly fastForward: LatencySummary; readonly fastForwardOther: LatencySummary; readonly opsPerSec: number }
  >;
}

/** The core bench's result: the physical limit and every guard against it. */
export interface CoreResult {
  readonly baseline: { readonly p50Us: number; readonly p99Us: number; readonly opsPerSec: number };
  readonly guards: readonly GuardCost[];
  readonly reps: readonly RepSample[];
}

const STEP = 'dispatch';

/**
 * The cost of each guard against a bare `SET key val NX PX` on the same connection: round trips
 * per path, latency at concurrency 1, throughput at `concurrency`, memory per committed step.
 * Guards are measured in a rotated order in each repetition, with the baseline measured before
 * and after them, so that a noisy neighbour hits all of them alike. Only the bench's own keys
 * are ever deleted.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * import { runCoreBench } from './core-bench';
 * const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
 * const opts = { reps: 5, latencyOps: 1000, throughputOps: 4000, concurrency: 64, memorySteps: 1000,
 *   roundTripSamples: 20, payload: 'x'.repeat(256), progress: console.log };
 * void runCoreBench(redis, redis.duplicate(), opts);
 * ```
 */
export async function runCoreBench(redis: Redis, admin: Redis, opts: CoreOptions): Promise<CoreResult> {
  const root = `cost-${process.pid}-${Date.now().toString(36)}`;
  const cleanup = () => unlinkMatching(admin, [`${root}*`, `mutex:${root}*`]);
  const token = randomBytes(16).toString('base64url');
  const run = async () => opts.payload;
  const mustNotRun = () => Promise.reject(new UnexpectedRunError('a committed step was dispatched again'));
  const expect = (guard: GuardUnderTest, kind: string) => (d: { kind: string }) => {
    if (d.kind !== kind) throw new Error(`${guard.name}: expected ${kind}, got ${d.kind}`);
  };

  const baseline = async (tag: string, ops: number) => {
    const set = (i: number) => redis.set(`${root}.base.${tag}.${i}`, token, 'PX', LOCK_TTL_MS, 'NX');
    const c1 = await timeSerial(ops, set);
    const rate = await opsPerSecond(opts.throughputOps, opts.concurrency, (i) => set(ops + i));
    return { c1, rate };
  };
  const measure = async (create: GuardFactory, prefix: string, ops: number, throughputOps: number) => {
    const guard = create(redis, prefix);
    const fire = await timeSerial(ops, (i) => guard.dispatch({ scope: `f${i}`, step: STEP }, run).then(expect(guard, 'ran')));
    const ff = await timeSerial(ops, (i) => guard.dispatch({ scope: `f${i}`, step: STEP }, mustNotRun).then(expect(guard, 'fast-forward')));
    // Another process's guard on the same keys: whatever the first instance remembers, this one has not seen.
    const other = create(redis, prefix);
    const ffOther = await timeSerial(ops, (i) => other.dispatch({ scope: `f${i}`, step: STEP }, mustNotRun).then(expect(other, 'fast-forward')));
    await other.close?.();
    const rate = await opsPerSecond(throughputOps, opts.concurrency, (i) => guard.dispatch({ scope: `t${i}`, step: STEP }, run).then(expect(guard, 'ran')));
    await guard.close?.();
    return { fire: summariseNs(fire), fastForward: summariseNs(ff), fastForwardOther: summariseNs(ffOther), opsPerSec: rate };
  };

  opts.progress('warm-up: every guard and the bare SET, results discarded');
  await baseline('warm', Math.min(opts.latencyOps, 300));
  for (const [index, { create }] of GUARDS.entries()) {
    await measure(create, `${root}.warm.${index}`, Math.min(opts.latencyOps, 300), Math.min(opts.throughputOps, 1000));
  }
  await cleanup();

  const roundTrips = new Map<string, RoundTrips>();
  for (const [index, { id, create }] of GUARDS.entries()) {
    opts.progress(`round trips: ${id}`);
    roundTrips.set(id, await countRoundTrips(create(redis, `${root}.rt.${index}`), 'rt', opts.payload, opts.roundTripSamples));
  }
  await cleanup();

  const reps: RepSample[] = [];
  for (let rep = 0; rep < opts.reps; rep++) {
    const before = await baseline(`r${rep}a`, opts.latencyOps);
    const guards: RepSample['guards'] = {};
    const order = GUARDS.map((_, i) => GUARDS[(i + rep) % GUARDS.length]);
    for (const { id, create } of order) {
      opts.progress(`rep ${rep + 1}/${opts.reps}: ${id}`);
      guards[id] = await measure(create, `${root}.r${rep}.${GUARDS.findIndex((g) => g.id === id)}`, opts.latencyOps, opts.throughputOps);
    }
    const after = await baseline(`r${rep}b`, opts.latencyOps);
    reps.push({ baseline: { c1: summariseNs([...before.c1, ...after.c1]), opsPerSec: (before.rate + after.rate) / 2 }, guards });
    await cleanup();
  }

  const memory = new Map<string, StepMemory>();
  for (const [index, { id, create }] of GUARDS.entries()) {
    opts.progress(`memory: ${id}`);
    const prefix = `${root}.mem.${index}`;
    const guard = create(redis, prefix);
    // Scope names of one width, so every key of a guard is as long as every other: MEMORY USAGE
    // rounds each key to an allocator bin, and names of varying length would let a guard whose
    // keys sit just over a bin edge win or lose a fraction of a byte by the naming alone.
    await opsPerSecond(opts.memorySteps, opts.concurrency, (i) => guard.dispatch({ scope: `m${String(i).padStart(6, '0')}`, step: STEP }, run));
    memory.set(id, await memoryPerStep(admin, [...guard.keyPatterns], opts.memorySteps, Buffer.byteLength(opts.payload), LOCK_TTL_MS));
    await guard.close?.();
  }
  await cleanup();

  const path = (id: string, pick: 'fire' | 'fastForward' | 'fastForwardOther'): PathLatency => ({
    p50Us: median(reps.map((r) => r.guards[id][pick].p50Us)),
    p99Us: median(reps.map((r) => r.guards[id][pick].p99Us)),
    p50Ratio: median(reps.map((r) => r.guards[id][pick].p50Us / r.baseline.c1.p50Us)),
    p99Ratio: median(reps.map((r) => r.guards[id][pick].p99Us / r.baseline.c1.p99Us)),
  });
  return {
    baseline: {
      p50Us: median(reps.map((r) => r.baseline.c1.p50Us)),
      p99Us: median(reps.map((r) => r.baseline.c1.p99Us)),
      opsPerSec: median(reps.map((r) => r.baseline.opsPerSec)),
    },
    guards: GUARDS.map(({ id, create }) => {
      const probe = create(redis, `${root}.probe`);
      return {
        id,
        name: probe.name,
        settings: probe.settings,
        roundTrips: roundTrips.get(id) as RoundTrips,
        fire: path(id, 'fire'),
        fastForward: path(id, 'fastForward'),
        fastForwardOther: path(id, 'fastForwardOther'),
        throughput: {
          opsPerSec: median(reps.map((r) => r.guards[id].opsPerSec)),
          ratio: median(reps.map((r) => r.guards[id].opsPerSec / r.baseline.opsPerSec)),
        },
        memory: memory.get(id) as StepMemory,
      };
    }),
    reps,
  };
}
