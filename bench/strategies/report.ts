/**
 * Turn the runs into what the bench reports: min/median/max per strategy, the printed table, and
 * the check of the seed's predictions that decides the exit code.
 */
import Table from 'cli-table3';
import { DUPLICATE_PHASES, PREDICTIONS, mustFireOnce, type StrategyName } from './strategies';
import type { StrategyRun } from './scenario';

/** Minimum, median and maximum of one measure over the runs. */
export interface Spread {
  readonly min: number;
  readonly median: number;
  readonly max: number;
}

/** One strategy over every run. */
export interface StrategySummary {
  readonly strategy: StrategyName;
  readonly runs: number;
  readonly invocations: number;
  readonly dispatches: Spread;
  readonly duplicates: { readonly a: Spread; readonly b: Spread; readonly c: Spread };
  readonly wallMs: Spread;
}

/** The outcome of checking the seed's predictions. */
export interface Verdict {
  /** Broken predictions: any one makes the bench exit non-zero. */
  readonly failures: readonly string[];
  /** Duplicates in phases the seed does not predict for a strawman: reported, not failed. */
  readonly notes: readonly string[];
}

/** Min, median (the mean of the middle two for an even count) and max. */
export function spread(values: readonly number[]): Spread {
  if (values.length === 0) throw new Error('spread of no values');
  const sorted = [...values].sort((x, y) => x - y);
  const mid = Math.floor(sorted.length / 2);
  const median = sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  return { min: sorted[0], median, max: sorted[sorted.length - 1] };
}

/** Summarise the runs per strategy, in the order the strategies ran. */
export function summarise(runs: readonly (readonly StrategyRun[])[]): StrategySummary[] {
  const byStrategy = new Map<StrategyName, StrategyRun[]>();
  for (const run of runs) for (const result of run) byStrategy.set(result.strategy, [...(byStrategy.get(result.strategy) ?? []), result]);
  return [...byStrategy].map(([strategy, results]) => ({
    strategy,
    runs: results.length,
    invocations: results[0].invocations.length,
    dispatches: spread(results.map((r) => r.dispatches.length)),
    duplicates: {
      a: spread(results.map((r) => r.duplicates.a)),
      b: spread(results.map((r) => r.duplicates.b)),
      c: spread(results.map((r) => r.duplicates.c)),
    },
    wallMs: spread(results.map((r) => r.wallMs)),
  }));
}

/**
 * Check every run against the seed: `fire-once` and `temporal-native` must dispatch exactly
 * once, and every strawman must show a duplicate in each phase where its failure is predicted.
 */
export function checkPredictions(runs: readonly (readonly StrategyRun[])[]): Verdict {
  const failures: string[] = [];
  const notes: string[] = [];
  for (const result of runs.flat()) {
    const where = `run ${result.run}, ${result.strategy}`;
    const prediction = PREDICTIONS[result.strategy];
    if (mustFireOnce(result.strategy) && result.dispatches.length !== 1) {
      failures.push(`${where}: ${result.dispatches.length} dispatches; ${result.strategy} must dispatch exactly 1`);
    }
    for (const phase of DUPLICATE_PHASES) {
      const count = result.duplicates[phase];
      if (prediction.duplicatesIn.includes(phase) && count === 0) {
        failures.push(`${where}: no duplicate in phase (${phase}), where the seed predicts one (${prediction.why})`);
      }
      if (!prediction.duplicatesIn.includes(phase) && count > 0 && !mustFireOnce(result.strategy)) {
        notes.push(`${where}: ${count} duplicate(s) in phase (${phase}), which the seed does not predict`);
      }
    }
    if (result.dispatches.filter((d) => d.phase === 'open').length !== 1) {
      failures.push(`${where}: the opening invocation did not dispatch exactly once; the scenario did not start as designed`);
    }
  }
  return { failures, notes };
}

function cell(s: Spread, runs: number): string {
  const fmt = (n: number) => (Number.isInteger(n) ? String(n) : n.toFixed(1));
  if (runs === 1 || s.min === s.max) return fmt(s.median);
  return `${fmt(s.median)} (${fmt(s.min)}–${fmt(s.max)})`;
}

/** The table: strategy | dispatches | duplicates a/b/c | invocations | wall ms | predicted. */
export function renderTable(summaries: readonly StrategySummary[]): string {
  // No colours: the table reads the same in a terminal, a CI log or RESULTS.md.
  const table = new Table({
    head: [
      'strategy',
      'dispatches',
      'dup (a) in flight',
      'dup (b) resolved, not written',
      'dup (c) after TTL',
      'invocations',
      'wall ms',
      'seed predicts dup in',
    ],
    style: { head: [], border: [] },
  });
  for (const s of summaries) {
    const predicted = PREDICTIONS[s.strategy].duplicatesIn;
    table.push([
      s.strategy,
      cell(s.dispatches, s.runs),
      cell(s.duplicates.a, s.runs),
      cell(s.duplicates.b, s.runs),
      cell(s.duplicates.c, s.runs),
      s.invocations,
      cell(s.wallMs, s.runs),
      predicted.length === 0 ? 'none (1 dispatch)' : predicted.map((p) => `(${p})`).join(' '),
    ]);
  }
  return table.toString();
}
