import type { Report } from './report';
import { quoted } from './printable';
import { table } from './table';

/** How many scopes the human report lists unless told otherwise. */
export const DEFAULT_SCOPE_LIMIT = 20;

/** Longest scope the `by scope` table shows whole: a 512-byte ID would make every row that wide. */
export const SCOPE_COLUMN_WIDTH = 60;

/** `text` with its middle cut out (`…`) so that it is at most `width` characters, both ends kept. */
function shortened(text: string, width: number): string {
  const chars = [...text];
  if (chars.length <= width) return text;
  const head = Math.ceil((width - 1) / 2);
  return `${chars.slice(0, head).join('')}…${chars.slice(chars.length - (width - 1 - head)).join('')}`;
}

/** The human form of a report: counts by job type, by scope, then every duplicate in full. */
export function formatReport(report: Report, scopeLimit = DEFAULT_SCOPE_LIMIT): string {
  const lines: string[] = [];
  const filter = report.jobType === undefined ? '' : `, job type ${quoted(report.jobType)}`;
  lines.push(`dispatch log of namespace ${quoted(report.namespace)} (${report.stream}), ${report.from} to ${report.to}${filter}: ${report.events} event(s)`);
  if (report.events === 0) {
    lines.push(
      report.jobType === undefined
        ? 'no decisions recorded in this window (are the prefix and namespace right, and the dispatchLog option on?)'
        : `no decisions of job type ${quoted(report.jobType)} recorded in this window (is --job-type right? Without it the report counts every job type)`,
    );
    return lines.join('\n');
  }
  const columns = report.decisions;
  const cells = (counts: Record<string, number>) => columns.map((d) => counts[d] ?? 0);

  lines.push('', 'by job type');
  lines.push(
    table(
      ['job type', ...columns, 'total'],
      report.byJobType.map((r) => [r.jobType || '(none)', ...cells(r.counts), r.total]),
    ),
  );

  const shown = scopeLimit > 0 ? report.byScope.slice(0, scopeLimit) : report.byScope;
  const more = report.byScope.length - shown.length;
  const cut = shown.some((r) => [...r.scope].length > SCOPE_COLUMN_WIDTH);
  const notes = [
    ...(more > 0 ? [`the ${shown.length} with most dispatches shown; --limit 0 for all`] : []),
    ...(cut ? [`scopes over ${SCOPE_COLUMN_WIDTH} characters cut in the middle (…); --json gives them whole`] : []),
  ];
  lines.push('', `by scope (${report.byScope.length}${notes.map((n) => `, ${n}`).join('')})`);
  lines.push(
    table(
      ['job type', 'scope', ...columns, 'total'],
      shown.map((r) => [r.jobType || '(none)', shortened(r.scope, SCOPE_COLUMN_WIDTH), ...cells(r.counts), r.total]),
    ),
  );

  lines.push('');
  if (report.duplicates.length === 0) {
    lines.push('duplicates: none (no scope and step was dispatched more than once in this window)');
    return lines.join('\n');
  }
  lines.push(`duplicates: ${report.duplicates.length} scope(s) dispatched more than once in this window`);
  for (const dup of report.duplicates) {
    lines.push('', `scope ${quoted(dup.scope)}, step ${quoted(dup.step)}, job type ${quoted(dup.jobType)}: ${dup.dispatches.length} dispatches`);
    const head = ['time', 'workflow ID', 'run ID', 'attempt', 'holder', 'fencing', 'outcome'];
    const rows = dup.dispatches.map((d) => [d.at, d.workflowId ?? '', d.runId ?? '', d.attempt ?? '', d.holder ?? '', d.fencingToken ?? '', d.outcome ?? '']);
    // Observe-only dispatches have no holder or fencing token: leave out columns that are empty throughout.
    const keep = head.map((_, i) => i < 3 || rows.some((row) => row[i] !== ''));
    lines.push(
      table(
        head.filter((_, i) => keep[i]),
        rows.map((row) => row.filter((_, i) => keep[i])),
      ),
    );
  }
  return lines.join('\n');
}
