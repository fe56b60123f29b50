import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';

/** One suite's numbers: what the table in docs/reliability.md is made of. */
export interface SuiteResult {
  readonly suite: string;
  /** What "runs" counts here, e.g. "3 rounds x 4000 workflow runs". */
  readonly runs: string;
  readonly dispatchesExpected: number;
  readonly dispatchesSeen: number;
  readonly ms: number;
}

const DIR = join(__dirname, '..', '..', '..', '.tmp', 'faults');
export const RESULTS_FILE = join(DIR, 'results.jsonl');
export const TABLE_FILE = join(DIR, 'results.md');

/** Start an empty results file for this run. */
export function resetResults(): void {
  mkdirSync(DIR, { recursive: true });
  writeFileSync(RESULTS_FILE, '');
}

/** Append one suite's numbers (the suites call this before their assertions, so failures show too). */
export function recordResult(result: SuiteResult): void {
  mkdirSync(dirname(RESULTS_FILE), { recursive: true });
  // The machine's 5-minute load average when the suite ended: context for its time.
  appendFileSync(RESULTS_FILE, `${JSON.stringify({ ...result, load5: Number(loadavg()[1].toFixed(1)) })}\n`);
}

/** The results of this run as a Markdown table, or '' when none were recorded. */
export function resultsTable(): string {
  if (!existsSync(RESULTS_FILE)) return '';
  const rows = readFileSync(RESULTS_FILE, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as SuiteResult);
  if (rows.length === 0) return '';
  const lines = [
    '| suite | runs | dispatches expected | dispatches seen | time |',
    '| --- | --- | --- | --- | --- |',
    ...rows.map((r) => `| ${r.suite} | ${r.runs} | ${r.dispatchesExpected} | ${r.dispatchesSeen} | ${(r.ms / 1000).toFixed(1)} s |`),
  ];
  return `${lines.join('\n')}\n`;
}
