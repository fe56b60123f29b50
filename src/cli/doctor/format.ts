import { EXIT } from '../exit-codes';
import { controlsEscaped } from '../printable';
import type { DoctorReport } from './doctor';
import type { Status } from './verdict';

const LABEL: Readonly<Record<Status, string>> = { ok: 'ok', warn: 'warn', fail: 'FAIL', unknown: '?' };

/** One line per verdict (status, check, node, what was found, the fix), then a summary line. */
export function formatDoctor(report: DoctorReport): string {
  const lines = [`fire-once doctor: ${report.redis} (${report.topology}, ${report.primaries.length} primar${report.primaries.length === 1 ? 'y' : 'ies'})`];
  for (const v of report.verdicts) {
    const node = v.node === undefined ? '' : `${v.node}  `;
    // Messages name namespaces and users read from the server: escape any control character in them.
    lines.push(controlsEscaped(`${LABEL[v.status].padEnd(5)} ${v.check.padEnd(13)}${node}${v.message}${v.fix === undefined ? '' : `. Fix: ${v.fix}`}`));
  }
  const { ok, warn, fail, unknown } = report.counts;
  const outcome =
    report.exitCode === EXIT.ok
      ? 'nothing puts the guarantee at risk'
      : report.exitCode === EXIT.atRisk
        ? 'the guarantee is at risk'
        : 'nothing found at risk, but some checks could not be made (run doctor as a user that may run CONFIG GET and INFO)';
  lines.push(`${fail} fail, ${unknown} unknown, ${warn} warn, ${ok} ok: ${outcome} (exit ${report.exitCode})`);
  return lines.join('\n');
}
