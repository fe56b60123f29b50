/**
 * The tables `bench:native` prints, every cell next to its ratio to the plain activity (or, for
 * the plugin and the native idiom, to each other), all from one run.
 */
import Table from 'cli-table3';
import { median, round } from '../cost/stats';
import { VARIANTS, type FailureVariant, type Variant } from './activities';
import type { FailureOutcome } from './failure';
import type { HistoryCount, Latency } from './measure';

/** Everything one run measured. */
export interface NativeResults {
  readonly latency: Record<'fresh' | 'completed', Record<Variant, Latency>>;
  /** Steps per second of each repetition, per variant. */
  readonly throughput: Record<Variant, readonly number[]>;
  readonly history: Record<Variant, HistoryCount>;
  /** Job body runs per variant over the latency phase (fresh + completed). */
  readonly jobRuns: Record<Variant, number>;
  readonly failure: readonly FailureOutcome[];
}

const LABEL: Readonly<Record<Variant, string>> = { plain: 'plain activity', plugin: 'FireOncePlugin', native: 'Temporal-native job workflow' };
const FAILURE_LABEL: Readonly<Record<FailureVariant, string>> = {
  plugin: 'FireOncePlugin (1 attempt)',
  native: 'Temporal-native (job activity 1 attempt)',
  'native-retry': 'Temporal-native (job activity 2 attempts)',
};

const table = (head: string[]) => new Table({ head, style: { head: [], border: [] } }); // no colours: reads the same in a file
const ms = (n: number) => n.toFixed(1);
const x = (n: number) => `${n.toFixed(2)}x`;
const plus = (n: number) => `${n >= 0 ? '+' : ''}${n.toFixed(1)} ms`;

/**
 * The median over repetitions of `a[i] / b[i]`: each repetition's variants ran back to back, so
 * a ratio within one repetition is not skewed by the load or the server's state changing between
 * repetitions, as a ratio of medians would be.
 */
export function pairedRatio(a: readonly number[], b: readonly number[]): number {
  return median(a.map((value, i) => value / b[i]));
}

/** The latency, throughput and history tables, and the failure table. */
export function renderNative(
  r: NativeResults,
  opts: { readonly samples: number; readonly inFlight: number; readonly steps: number; readonly reps: number },
): string {
  const lat = table([
    'step run as',
    'fresh p50 ms',
    'fresh p99 ms',
    'fresh p50 vs plain',
    'completed p50 ms',
    'completed p99 ms',
    'completed p50 vs plain',
    'job runs',
  ]);
  for (const v of VARIANTS) {
    const f = r.latency.fresh[v];
    const c = r.latency.completed[v];
    lat.push([
      LABEL[v],
      ms(f.p50Ms),
      ms(f.p99Ms),
      plus(f.p50Ms - r.latency.fresh.plain.p50Ms),
      ms(c.p50Ms),
      ms(c.p99Ms),
      x(c.p50Ms / r.latency.completed.plain.p50Ms),
      r.jobRuns[v],
    ]);
  }
  const tput = table([
    'step run as',
    `steps/s at ${opts.inFlight} in flight, median (min–max)`,
    'vs plain',
    'history events per fresh step',
    'per completed step',
  ]);
  for (const v of VARIANTS) {
    const rates = r.throughput[v];
    const range = `${round(median(rates), 1)} (${round(Math.min(...rates), 1)}–${round(Math.max(...rates), 1)})`;
    tput.push([LABEL[v], range, x(pairedRatio(rates, r.throughput.plain)), round(r.history[v].fresh, 1), round(r.history[v].completed, 1)]);
  }
  const fail = table(['job fails while runs wait on it', 'runs', 'succeeded', 'failed', 'job ran']);
  for (const o of r.failure) fail.push([FAILURE_LABEL[o.variant], o.runs, o.succeeded, o.failed, o.jobRuns]);
  const { plugin, native } = r.latency.fresh;
  const side =
    `plugin vs native, side by side: fresh p50 ${ms(plugin.p50Ms)} vs ${ms(native.p50Ms)} ms ` +
    `(native ${x(native.p50Ms / plugin.p50Ms)} the plugin's); plugin throughput ${x(pairedRatio(r.throughput.plugin, r.throughput.native))} the native idiom's; ` +
    `history ${round(r.history.plugin.fresh, 1)} vs ${round(r.history.native.fresh, 1)} events per fresh step`;
  return [
    `Latency: ${opts.samples} steps per variant, one workflow run at a time, variants interleaved; "completed" runs each step's scope again. "job runs" counts the job body (its own Redis counter).`,
    lat.toString(),
    `\nThroughput: ${opts.steps} fresh steps per variant and repetition, ${opts.inFlight} workflow runs in flight, ${opts.reps} repetitions (variant order rotated); "vs plain" is the median of each repetition's ratio. History from the latency runs.`,
    tput.toString(),
    '\nFailure while waiting: one run starts a job that fails on its first run; more runs arrive while it is in flight.',
    fail.toString(),
    `\n${side}`,
  ].join('\n');
}
