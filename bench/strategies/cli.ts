/**
 * The flags of `npm run bench:strategies`, parsed with commander and checked in one place.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import { positiveInt, nonNegativeInt } from '../shared/args';
import { STRATEGIES, parseStrategies, type StrategyName } from './strategies';

/** Everything one bench invocation is configured with. */
export interface BenchConfig {
  /** Repetitions of the whole scenario; the table reports min/median/max over them. */
  readonly runs: number;
  /** Strategies to run, in order. */
  readonly strategies: readonly StrategyName[];
  /** How long the job runs before it resolves. */
  readonly jobMs: number;
  /** How long after resolving the job writes its artifact: the window of phase (b). */
  readonly artifactDelayMs: number;
  /** Lock TTL of every lock-based strategy; phase (c) starts after it ran out. */
  readonly lockTtlMs: number;
  /** Invocations in phase (a), (b) and (c). */
  readonly burstA: number;
  readonly burstB: number;
  readonly burstC: number;
  /** Gap between two invocations of one burst. */
  readonly spacingMs: number;
  /** Where `strategies.json` and `strategies.svg` go. */
  readonly outDir: string;
  /** Where the committed copy of the timeline goes, or `undefined` for none. */
  readonly timelineCopy: string | undefined;
}

function strategyList(value: string): StrategyName[] {
  try {
    return parseStrategies(value);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message.replace(/^--strategies: /, ''));
  }
}

/**
 * Parse `argv` (as `process.argv`) into a {@link BenchConfig}. Exits with commander's message on
 * a bad flag, and on timings that cannot reproduce the phases.
 */
export function parseBenchArgs(argv: readonly string[]): BenchConfig {
  const program = new Command('bench:strategies')
    .description("Reproduce the seed's strategy table on a real Temporal dev server and a real Redis.")
    .option('--runs <n>', 'repetitions of the whole scenario', positiveInt, 5)
    .addOption(
      new Option('--strategies <list>', `comma-separated subset of ${STRATEGIES.join(',')}`).argParser(strategyList).default([...STRATEGIES], 'all of them'),
    )
    .option('--job-ms <ms>', 'how long the job runs before it resolves', positiveInt, 1_200)
    .option('--artifact-delay-ms <ms>', 'how long after resolving the job writes its artifact (phase b window)', positiveInt, 1_000)
    .option('--lock-ttl-ms <ms>', 'lock TTL of the lock-based strategies; phase c starts after it', positiveInt, 3_000)
    .option('--burst-a <n>', 'invocations while the job is in flight', positiveInt, 6)
    .option('--burst-b <n>', 'invocations between "job resolved" and "artifact written"', positiveInt, 4)
    .option('--burst-c <n>', 'invocations after the lock TTL ran out', positiveInt, 3)
    .option('--spacing-ms <ms>', 'gap between two invocations of a burst', nonNegativeInt, 10)
    .option('--out-dir <dir>', 'where strategies.json and strategies.svg are written', 'bench/out')
    .option('--timeline-copy <file>', 'also copy the timeline to <file> (bench/strategies-timeline.svg is the figure RESULTS.md shows)')
    .showHelpAfterError('(add --help to list the flags)');
  program.parse([...argv]);
  const o = program.opts<{
    runs: number;
    strategies: StrategyName[];
    jobMs: number;
    artifactDelayMs: number;
    lockTtlMs: number;
    burstA: number;
    burstB: number;
    burstC: number;
    spacingMs: number;
    outDir: string;
    timelineCopy: string | undefined;
  }>();
  // The lock must outlive the job's whole life, dispatch to artifact, or fire-once and lock-only
  // would not hold it in phase (b); the margin absorbs queueing on a busy machine.
  const margin = 500;
  if (o.lockTtlMs < o.jobMs + o.artifactDelayMs + margin) {
    program.error(
      `error: --lock-ttl-ms (${o.lockTtlMs}) must be at least --job-ms + --artifact-delay-ms + ${margin} ` +
        `(${o.jobMs + o.artifactDelayMs + margin}): the lock has to cover the job from dispatch to artifact`,
    );
  }
  return {
    runs: o.runs,
    strategies: o.strategies,
    jobMs: o.jobMs,
    artifactDelayMs: o.artifactDelayMs,
    lockTtlMs: o.lockTtlMs,
    burstA: o.burstA,
    burstB: o.burstB,
    burstC: o.burstC,
    spacingMs: o.spacingMs,
    outDir: o.outDir,
    timelineCopy: o.timelineCopy,
  };
}
