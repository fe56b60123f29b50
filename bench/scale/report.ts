/** The scale bench's table and verdict. */
import Table from 'cli-table3';
import type { RaceResult } from './core-race';

const perSecond = (n: number, ms: number) => Math.round((n / ms) * 1000);

export function renderTable(results: readonly RaceResult[]): string {
  const table = new Table({
    head: ['mode', 'store', 'scopes (K)', 'racers', 'invocations', 'dispatches', 'duplicates', 'missing', 'failed', 'wall s', 'invocations/s', 'scopes/s'],
  });
  for (const r of results) {
    table.push([
      r.mode,
      r.store,
      r.scopes,
      r.racers,
      r.invocations,
      r.dispatches,
      r.duplicates,
      r.missing,
      r.failed,
      (r.wallMs / 1000).toFixed(1),
      perSecond(r.invocations, r.wallMs),
      perSecond(r.scopes, r.wallMs),
    ]);
  }
  return table.toString();
}

/** Every run must show exactly one dispatch per scope and no failed invocation. */
export function problems(results: readonly RaceResult[]): string[] {
  return results.flatMap((r) => {
    const where = `${r.mode} ${r.store} K=${r.scopes}`;
    return [
      ...(r.duplicates > 0 ? [`${where}: ${r.duplicates} duplicate dispatch(es)`] : []),
      ...(r.missing > 0 ? [`${where}: ${r.missing} scope(s) never dispatched`] : []),
      ...(r.failed > 0 ? [`${where}: ${r.failed} invocation(s) failed`] : []),
    ];
  });
}
