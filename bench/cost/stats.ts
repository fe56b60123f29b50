/**
 * The percentile of `values` by the nearest-rank method: the smallest sample with at least `p`
 * percent of the samples at or below it. `NaN` for no samples.
 *
 * @example
 * ```ts
 * import { percentile } from './stats';
 * percentile([4, 1, 3, 2], 50); // 2
 * percentile([4, 1, 3, 2], 99); // 4
 * ```
 */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(Math.max(rank, 1), sorted.length) - 1];
}

/**
 * The median of `values` (the mean of the two middle ones for an even count).
 *
 * @example
 * ```ts
 * import { median } from './stats';
 * median([3, 1, 2]);    // 2
 * median([4, 1, 3, 2]); // 2.5
 * ```
 */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Latency of one repetition, in microseconds. */
export interface LatencySummary {
  readonly p50Us: number;
  readonly p99Us: number;
  readonly samples: number;
}

/**
 * p50 and p99 of samples given in nanoseconds, reported in microseconds.
 *
 * @example
 * ```ts
 * import { summariseNs } from './stats';
 * summariseNs([1000n, 2000n, 3000n]).p50Us; // 2
 * ```
 */
export function summariseNs(samplesNs: readonly bigint[]): LatencySummary {
  const us = samplesNs.map((ns) => Number(ns) / 1000);
  return { p50Us: percentile(us, 50), p99Us: percentile(us, 99), samples: us.length };
}

/**
 * Round to `digits` decimals, for tables and JSON that people read.
 *
 * @example
 * ```ts
 * import { round } from './stats';
 * round(1.23456, 2); // 1.23
 * ```
 */
export function round(value: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
