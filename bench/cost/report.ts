import Table from 'cli-table3';
import type { CoreResult, GuardCost } from './core-bench';
import type { E2eResult } from './e2e/run-e2e';
import type { MachineInfo } from './machine';
import { closingLine, verdict } from './verdict';

/** Everything one `npm run bench` run measured, as written to bench/out/cost.json. */
export interface CostReport {
  readonly command: string;
  readonly startedAt: string;
  readonly seconds: number;
  /** 1, 5 and 15 minute load averages when the bench ended. */
  readonly loadAverageAtEnd: readonly number[];
  readonly options: Record<string, unknown>;
  readonly machine: MachineInfo;
  readonly core: CoreResult;
  readonly e2e?: E2eResult;
}

const x = (ratio: number) => `${ratio.toFixed(2)}x`;
const us = (value: number) => value.toFixed(0);
const rt = (value: number) => (Number.isInteger(value) ? String(value) : value.toFixed(2));
const bytes = (value: number) => value.toFixed(0);

function trips(g: GuardCost): string {
  const { acquire, fastForward, commit, release } = g.roundTrips;
  return `${rt(acquire)} / ${rt(fastForward)} / ${rt(commit)} / ${rt(release)}`;
}

function rows(report: CostReport): { head: string[]; body: string[][] }[] {
  const { core } = report;
  const costHead = ['guard', 'round trips acq / ff / commit / release', 'bytes per step while locked (overhead)', 'bytes per step after lock TTL (overhead)'];
  const costBody = core.guards.map((g) => [
    g.name,
    trips(g),
    `${bytes(g.memory.bytesPerStepWithLock)} (${bytes(g.memory.overheadWithLock)}), ${rt(g.memory.keysPerStepWithLock)} keys`,
    `${bytes(g.memory.bytesPerStepAfterLock)} (${bytes(g.memory.overheadAfterLock)}), ${rt(g.memory.keysPerStepAfterLock)} keys`,
  ]);
  const speedHead = [
    'guard',
    'fire p50 us (x SET)',
    'fire p99 us (x SET)',
    'fast-forward p50 us (x SET)',
    'fast-forward p99 us (x SET)',
    "another process's fast-forward p50 us (x SET)",
    `c${report.options.concurrency} ops/s (x SET)`,
  ];
  const speedBody = [
    [
      'bare SET NX PX',
      `${us(core.baseline.p50Us)} (1.00x)`,
      `${us(core.baseline.p99Us)} (1.00x)`,
      '-',
      '-',
      '-',
      `${core.baseline.opsPerSec.toFixed(0)} (1.00x)`,
    ],
    ...core.guards.map((g) => [
      g.name,
      `${us(g.fire.p50Us)} (${x(g.fire.p50Ratio)})`,
      `${us(g.fire.p99Us)} (${x(g.fire.p99Ratio)})`,
      `${us(g.fastForward.p50Us)} (${x(g.fastForward.p50Ratio)})`,
      `${us(g.fastForward.p99Us)} (${x(g.fastForward.p99Ratio)})`,
      `${us(g.fastForwardOther.p50Us)} (${x(g.fastForwardOther.p50Ratio)})`,
      `${g.throughput.opsPerSec.toFixed(0)} (${x(g.throughput.ratio)})`,
    ]),
  ];
  const measures = verdict(report);
  const verdictHead = ['measure', 'ours', 'best peer, or target', 'at or ahead'];
  const verdictBody = measures.map((m) => [m.measure, m.ours, m.against, m.ok ? 'yes' : 'NO']);
  const tables = [
    { head: speedHead, body: speedBody },
    { head: costHead, body: costBody },
    { head: verdictHead, body: verdictBody },
  ];
  const profile = report.e2e?.profile;
  if (profile === undefined) return tables;
  const profileHead = ['end to end, worker main thread: us per activity in', 'guarded', 'plain', 'floor', 'guarded - floor'];
  const profileBody = profile
    .slice(0, 16)
    .map(({ origin, us: t }) => [origin, us(t.guarded ?? 0), us(t.plain ?? 0), us(t.floor ?? 0), us((t.guarded ?? 0) - (t.floor ?? 0))]);
  return [...tables, { head: profileHead, body: profileBody }];
}

function e2eLine(e2e: E2eResult | undefined): string {
  if (e2e === undefined) return 'end to end: skipped (--skip-e2e)';
  return (
    `end to end (one worker, dev server from ${e2e.temporalSource}): guarded ${e2e.guardedPerSec.toFixed(1)} activities/s, ` +
    `unguarded ${e2e.plainPerSec.toFixed(1)} activities/s, ratio ${e2e.ratio.toFixed(3)} (median of ${e2e.reps.length} paired reps, ` +
    `range ${e2e.ratioRange[0].toFixed(2)}-${e2e.ratioRange[1].toFixed(2)}; pooled ${e2e.pooledRatio.toFixed(3)}; ` +
    `${e2e.artifacts}/${e2e.expectedArtifacts} artifacts written; ${e2e.failures.length} workflow runs failed). ` +
    `Plugin per guarded activity: ${e2e.commandsPerGuardedActivity.toFixed(2)} Redis commands ` +
    `(${Object.entries(e2e.commandNames)
      .map(([n, c]) => `${n} ${c}`)
      .join(', ')}), ` +
    `${bytes(e2e.memoryPerGuardedActivity.bytesPerStepWithLock)} bytes while locked, ` +
    `${bytes(e2e.memoryPerGuardedActivity.bytesPerStepAfterLock)} after (every key under the prefix, dispatch log included). ` +
    `CPU per activity (this process + redis-server): guarded ${e2e.cpuUsPerActivity.guarded.toFixed(0)} us ` +
    `(redis ${e2e.cpuUsPerActivity.redisGuarded.toFixed(0)}), unguarded ${e2e.cpuUsPerActivity.plain.toFixed(0)} us ` +
    `(redis ${e2e.cpuUsPerActivity.redisPlain.toFixed(0)}): the guard costs ${(e2e.cpuUsPerActivity.guarded - e2e.cpuUsPerActivity.plain).toFixed(0)} us of CPU per activity. ` +
    `Floor (unguarded activities making two plain SETs of their own, the least a guard that checks before and stores after can do): ` +
    `${e2e.floor.perSec.toFixed(1)} activities/s, ${e2e.floor.cpuUs.toFixed(0)} us of CPU per activity (redis ${e2e.floor.redisCpuUs.toFixed(0)}); floor / unguarded pooled ` +
    `${e2e.floor.overPlainPooled.toFixed(3)}, guarded / floor pooled ${e2e.floor.guardedOverFloorPooled.toFixed(3)}` +
    e2e.failures
      .slice(0, 5)
      .map((f) => `\n  failed: ${f}`)
      .join('')
  );
}

/**
 * The ratio tables for the terminal, drawn with cli-table3.
 *
 * @example
 * ```ts
 * import { renderTables, type CostReport } from './report';
 * declare const report: CostReport;
 * console.log(renderTables(report));
 * ```
 */
export function renderTables(report: CostReport): string {
  const tables = rows(report).map(({ head, body }) => {
    const table = new Table({ head, style: { head: [], border: [] } });
    table.push(...body);
    return table.toString();
  });
  return [...tables, e2eLine(report.e2e), closingLine(verdict(report))].join('\n');
}

/**
 * The same tables in Markdown, for RESULTS.md.
 *
 * @example
 * ```ts
 * import { renderMarkdown, type CostReport } from './report';
 * declare const report: CostReport;
 * console.log(renderMarkdown(report));
 * ```
 */
export function renderMarkdown(report: CostReport): string {
  const md = ({ head, body }: { head: string[]; body: string[][] }) =>
    [`| ${head.join(' | ')} |`, `| ${head.map(() => '---').join(' | ')} |`, ...body.map((r) => `| ${r.join(' | ')} |`)].join('\n');
  return `${[...rows(report).map(md), e2eLine(report.e2e), closingLine(verdict(report))].join('\n\n')}\n`;
}
