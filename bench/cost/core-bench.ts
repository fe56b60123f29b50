import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { countRoundTrips, type RoundTrips } from './count-round-trips';
import { GUARDS, LOCK_TTL_MS, UnexpectedRunError, type GuardUnderTest } from './guards';
import { memoryPerStep, unlinkMatching, type StepMemory } from './memory';
import { median, summariseNs, type LatencySummary } from './stats';
import { opsPerSecond, timeInterleaved } from './timing';

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
 * Latency is timed with every guard and the bare SET taking turns op by op, so that a noisy
 * neighbour hits all of them alike; throughput one guard at a time, in an order that rotates
 * each repetition, with the bare SET's rate before and after them. Only the bench's own keys are
 * ever deleted.
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

  const set = (tag: string) => (i: number) => redis.set(`${root}.base.${tag}.${i}`, token, 'PX', LOCK_TTL_MS, 'NX');
  // Latency: every guard and the bare SET take turns op by op (timeInterleaved), so each ratio
  // compares samples taken in the same moments of a shared, noisy machine.
  const latency = async (tag: string, ops: number) => {
    const lanes = GUARDS.map(({ id, create }, index) => ({ id, guard: create(redis, `${root}.${tag}.${index}`) }));
    const fresh = (guard: GuardUnderTest) => (i: number) => guard.dispatch({ scope: `f${i}`, step: STEP }, run).then(expect(guard, 'ran'));
    const done = (guard: GuardUnderTest) => (i: number) => guard.dispatch({ scope: `f${i}`, step: STEP }, mustNotRun).then(expect(guard, 'fast-forward'));
    const fire = await timeInterleaved(ops, [...lanes.map(({ guard }) => fresh(guard)), set(`${tag}.fire`)]);
    const ff = await timeInterleaved(ops, [...lanes.map(({ guard }) => done(guard)), set(`${tag}.ff`)]);
    // Another process's guard on the same keys: whatever the first instance remembers, this one has not seen.
    const others = GUARDS.map(({ create }, index) => create(redis, `${root}.${tag}.${index}`));
    const ffOther = await timeInterleaved(ops, [...others.map((guard) => done(guard)), set(`${tag}.other`)]);
    await Promise.all([...lanes.map(({ guard }) => guard.close?.()), ...others.map((guard) => guard.close?.())]);
    const c1 = summariseNs([...fire[lanes.length], ...ff[lanes.length], ...ffOther[lanes.length]]);
    const paths = Object.fromEntries(
      lanes.map(({ id }, lane) => [id, { fire: summariseNs(fire[lane]), fastForward: summariseNs(ff[lane]), fastForwardOther: summariseNs(ffOther[lane]) }]),
    );
    return { c1, paths };
  };
  // Throughput: one guard at a time at `concurrency`, in an order that rotates each repetition,
  // with the bare SET's rate measured before and after them.
  const throughput = async (tag: string, label: string, rep: number, ops: number) => {
    const rates: Record<string, number> = {};
    const before = await opsPerSecond(ops, opts.concurrency, set(`${tag}.rate-a`));
    for (let turn = 0; turn < GUARDS.length; turn++) {
      const index = (turn + rep) % GUARDS.length;
      const { id, create } = GUARDS[index];
      opts.progress(`${label}: throughput, ${id}`);
      const guard = create(redis, `${root}.${tag}.t${index}`);
      rates[id] = await opsPerSecond(ops, opts.concurrency, (i) => guard.dispatch({ scope: `t${i}`, step: STEP }, run).then(expect(guard, 'ran')));
      await guard.close?.();
    }
    const after = await opsPerSecond(ops, opts.concurrency, set(`${tag}.rate-b`));
    return { rates, baseline: (before + after) / 2 };
  };

  opts.progress('warm-up: every guard and the bare SET, results discarded');
  await latency('warm', Math.min(opts.latencyOps, 300));
  await throughput('warm', 'warm-up', 0, Math.min(opts.throughputOps, 1000));
  await cleanup();

  const roundTrips = new Map<string, RoundTrips>();
  for (const [index, { id, create }] of GUARDS.entries()) {
    opts.progress(`round trips: ${id}`);
    roundTrips.set(id, await countRoundTrips(create(redis, `${root}.rt.${index}`), 'rt', opts.payload, opts.roundTripSamples));
  }
  await cleanup();

  const reps: RepSample[] = [];
  for (let rep = 0; rep < opts.reps; rep++) {
    opts.progress(`rep ${rep + 1}/${opts.reps}: latency, every guard and SET in turn`);
    const { c1, paths } = await latency(`r${rep}`, opts.latencyOps);
    const { rates, baseline } = await throughput(`r${rep}`, `rep ${rep + 1}/${opts.reps}`, rep, opts.throughputOps);
    const guards: RepSample['guards'] = Object.fromEntries(GUARDS.map(({ id }) => [id, { ...paths[id], opsPerSec: rates[id] }]));
    reps.push({ baseline: { c1, opsPerSec: baseline }, guards });
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
