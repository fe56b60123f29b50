import type { CostReport } from './report';

/** One measure of the closing line: ours against the best peer (or a target), and whether ours is at or ahead. */
export interface Measure {
  readonly measure: string;
  readonly ours: string;
  /** The best peer's value, or the target it must meet. */
  readonly against: string;
  readonly ok: boolean;
}

/** Lower is better unless `higher`. */
function versus(measure: string, ours: number, peers: readonly { name: string; value: number }[], format: (v: number) => string, higher = false): Measure {
  const best = peers.reduce((a, b) => ((higher ? b.value > a.value : b.value < a.value) ? b : a));
  const ok = higher ? ours >= best.value : ours <= best.value;
  return { measure, ours: format(ours), against: `${format(best.value)} (${best.name})`, ok };
}

function target(measure: string, ours: number, limit: number, format: (v: number) => string, higher = false): Measure {
  return { measure, ours: format(ours), against: `target ${higher ? '>=' : '<='} ${format(limit)}`, ok: higher ? ours >= limit : ours <= limit };
}

const x = (v: number) => `${v.toFixed(2)}x`;
const b = (v: number) => `${v.toFixed(0)} B`;
const n = (v: number) => v.toFixed(2);

/**
 * Every measure issue 11 asks of the guard, from one run: ours against every peer on each row of
 * the tables, and against the targets (ratios to the same run's bare `SET NX PX`). The bench
 * prints them and exits non-zero unless ours is at or ahead on all of them.
 *
 * @example
 * ```ts
 * import { verdict } from './verdict';
 * import type { CostReport } from './report';
 * declare const report: CostReport;
 * const measures = verdict(report);
 * console.log(`${measures.filter((m) => m.ok).length}/${measures.length}`);
 * ```
 */
export function verdict(report: CostReport): Measure[] {
  const ours = report.core.guards.find((g) => g.id === 'ours');
  if (ours === undefined) throw new Error('the cost bench ran without the library itself');
  const peers = report.core.guards.filter((g) => g !== ours);
  const each = (pick: (g: (typeof peers)[number]) => number) => peers.map((g) => ({ name: g.name, value: pick(g) }));
  const trips = (g: (typeof peers)[number]) => g.roundTrips.acquire + g.roundTrips.fastForward + g.roundTrips.commit + g.roundTrips.release;
  const measures: Measure[] = [
    versus(
      'fire p50',
      ours.fire.p50Ratio,
      each((g) => g.fire.p50Ratio),
      x,
    ),
    versus(
      'fire p99',
      ours.fire.p99Ratio,
      each((g) => g.fire.p99Ratio),
      x,
    ),
    versus(
      'fast-forward p50',
      ours.fastForward.p50Ratio,
      each((g) => g.fastForward.p50Ratio),
      x,
    ),
    versus(
      'fast-forward p99',
      ours.fastForward.p99Ratio,
      each((g) => g.fastForward.p99Ratio),
      x,
    ),
    versus(
      'fast-forward p50, a step another process committed',
      ours.fastForwardOther.p50Ratio,
      each((g) => g.fastForwardOther.p50Ratio),
      x,
    ),
    versus(
      `throughput at ${String(report.options.concurrency)} in flight`,
      ours.throughput.ratio,
      each((g) => g.throughput.ratio),
      x,
      true,
    ),
    versus('round trips, acquire + ff + commit + release', trips(ours), each(trips), n),
    versus(
      'bytes per step while locked',
      ours.memory.bytesPerStepWithLock,
      each((g) => g.memory.bytesPerStepWithLock),
      b,
    ),
    versus(
      'bytes per step after the lock TTL',
      ours.memory.bytesPerStepAfterLock,
      each((g) => g.memory.bytesPerStepAfterLock),
      b,
    ),
    target('fire p50', ours.fire.p50Ratio, 2.0, x),
    target('fast-forward p50', ours.fastForward.p50Ratio, 1.0, x),
    target(`throughput at ${String(report.options.concurrency)} in flight`, ours.throughput.ratio, 0.45, x, true),
    target('bytes per step after the lock TTL', ours.memory.bytesPerStepAfterLock, 424, b),
    target('bytes per step while locked', ours.memory.bytesPerStepWithLock, 560, b),
  ];
  const { e2e } = report;
  if (e2e !== undefined) {
    measures.push(target('end to end, guarded / unguarded, pooled', e2e.pooledRatio, 0.95, (v) => v.toFixed(3), true));
    measures.push(target('Redis commands per guarded activity', e2e.commandsPerGuardedActivity, 3, n));
  }
  return measures;
}

/** The closing line: `cost: ours at or ahead of every peer on N/M measures`. */
export function closingLine(measures: readonly Measure[]): string {
  return `cost: ours at or ahead of every peer on ${measures.filter((m) => m.ok).length}/${measures.length} measures`;
}
