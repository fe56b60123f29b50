// The tables of bench:slots, and bench/out/slots.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import Table from 'cli-table3';
import type { Options } from './main';
import type { Sample, Timeline } from './scenario';
import type { Policy } from './workflows';

export const ROWS = { control: undefined, park: 'jobPark', wait: 'jobWait', fail: 'jobFail', skip: 'jobSkip' } as const satisfies Record<
  string,
  Policy | undefined
>;
export type Row = keyof typeof ROWS;
const LABELS: Record<Row, string> = {
  control: 'no burst (control)',
  park: "'park' (new default)",
  wait: "'wait' (in slot)",
  fail: "'fail'",
  skip: "'skip'",
};

/** One scenario's sample, and which row it belongs to. */
export interface Measured extends Sample {
  readonly workers: number;
  readonly row: Row;
}

const median = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? NaN : sorted[Math.floor((sorted.length - 1) / 2)];
};
const table = (head: string[]) => new Table({ head, style: { head: [], border: [] } });

export function report(o: Options, measured: readonly Measured[]): void {
  const groups = o.workers.flatMap((workers) =>
    o.rows.map((row) => ({ workers, row, samples: measured.filter((m) => m.workers === workers && m.row === row) })),
  );
  const label = (g: { workers: number; row: Row }) => `${g.workers} process${g.workers > 1 ? 'es' : ''}, ${LABELS[g.row]}`;
  const each = (samples: readonly Measured[], f: (s: Measured) => number | undefined, digits = 0) =>
    samples.map((s) => f(s)?.toFixed(digits) ?? '-').join(' / ');

  const main = table([
    '',
    'unrelated schedule-to-start p50 ms',
    'vs control',
    'burst done after ms',
    'executions',
    'dispatches',
    'waiter slot-s',
    'parked on another process',
  ]);
  const summary = groups.map((g) => {
    const controlP50 = median(measured.filter((m) => m.workers === g.workers && m.row === 'control').flatMap((s) => s.scheduleToStartMs));
    const p50 = median(g.samples.flatMap((s) => s.scheduleToStartMs));
    main.push([
      label(g),
      p50.toFixed(0),
      (p50 / controlP50).toFixed(2),
      each(g.samples, (s) => s.timeline?.burstDone),
      each(g.samples, (s) => (g.row === 'control' ? undefined : s.executions)),
      each(g.samples, (s) => (g.row === 'control' ? undefined : s.dispatches)),
      each(g.samples, (s) => (g.row === 'control' ? undefined : s.waiterSlotSeconds), 1),
      each(g.samples, (s) => (g.row === 'park' ? s.parkedElsewhere : undefined)),
    ]);
    return { workers: g.workers, row: g.row, scheduleToStartP50Ms: p50, samples: g.samples };
  });

  // Where the burst's time went: each step's ms, one value per repetition.
  const steps: [string, (t: Timeline) => number][] = [
    ['first start -> job started', (t) => t.jobStarted],
    ["job ended -> holder's commit and hand-over returned", (t) => t.handedOver - t.jobEnded],
    ['job ended -> last activity closed', (t) => t.lastActivityClosed - t.jobEnded],
    ['-> last run closed', (t) => t.lastRunClosed - t.lastActivityClosed],
    ['-> result seen here', (t) => t.burstDone - t.lastRunClosed],
    ['runs scheduled after the job ended', (t) => t.scheduledAfterJob],
    ['workflow task timeouts', (t) => t.workflowTaskTimeouts],
  ];
  const timeline = table(['', ...steps.map(([name]) => name)]);
  for (const g of groups.filter((g) => g.row !== 'control'))
    timeline.push([label(g), ...steps.map(([, f]) => each(g.samples, (s) => (s.timeline ? f(s.timeline) : undefined)))]);

  console.log(
    `\nbench:slots: ${o.runs} runs of one scope, ${o.jobMs} ms job, ${o.slots} activity slots per worker process, ${o.unrelated} unrelated 10 ms activities at +${o.unrelatedAtMs} ms; ` +
      `${o.reps} repetitions (values: one per repetition); ${cpus().length} CPUs (${cpus()[0]?.model ?? 'unknown'})\n`,
  );
  console.log(main.toString());
  console.log("\nWhere the burst's time went (ms: the job's start, then the last run's steps after the job ended; then two counts over the burst's runs):\n");
  console.log(timeline.toString());
  mkdirSync(o.out, { recursive: true });
  writeFileSync(join(o.out, 'slots.json'), JSON.stringify({ options: o, summary }, null, 2));
}
