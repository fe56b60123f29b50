import type { FireOnceKeys } from '../core/keys';
import { readLog, type LogEntry } from './log';
import type { RawConnection } from './raw-connection';

/** Decisions in the order columns show them; any other name found in the log follows these. */
export const DECISION_ORDER: readonly string[] = [
  'dispatched',
  'fast-forwarded',
  'in-flight-waited',
  'in-flight-skipped',
  'in-flight-failed',
  'conflict',
  'committed',
  'released-on-failure',
  'release-refused',
  'lock-lost',
  'release-forced',
  'invalidated',
];

/** Decisions that end a dispatch: the outcome shown beside each dispatch of a duplicate. */
const OUTCOMES = new Set(['committed', 'released-on-failure', 'release-refused', 'lock-lost', 'release-forced']);

/** Counts per decision name. */
export type Counts = Record<string, number>;

/** One `dispatched` entry of a duplicated (scope, step). */
export interface DispatchRow {
  readonly id: string;
  readonly at: string;
  readonly workflowId?: string;
  readonly runId?: string;
  readonly activityId?: string;
  readonly attempt?: number;
  readonly holder?: string;
  readonly fencingToken?: number;
  /**
   * How that dispatch ended, by its holder's later entry; `'observe-only'` when it was not guarded;
   * `undefined` if no ending is in the window.
   */
  outcome?: string;
}

/** A (scope, step) dispatched more than once in the window. */
export interface Duplicate {
  readonly jobType: string;
  readonly scope: string;
  readonly step: string;
  readonly dispatches: readonly DispatchRow[];
}

/** What `fire-once report` prints, as `--json` prints it. */
export interface Report {
  readonly prefix: string;
  readonly stream: string;
  readonly from: string;
  readonly to: string;
  readonly jobType?: string;
  /** Entries in the window (after `--job-type`). */
  readonly events: number;
  /** Decision names present, in column order. */
  readonly decisions: readonly string[];
  readonly byJobType: readonly { readonly jobType: string; readonly counts: Counts; readonly total: number }[];
  /** Every (job type, scope), most dispatches first. */
  readonly byScope: readonly { readonly jobType: string; readonly scope: string; readonly counts: Counts; readonly total: number }[];
  readonly duplicates: readonly Duplicate[];
}

/** Window and filter of one report. */
export interface ReportQuery {
  readonly fromMs: number;
  readonly toMs: number;
  readonly jobType?: string;
}

/**
 * Read `<prefix>:log` over the window and count decisions per job type and per scope; a
 * (scope, step) with more than one `dispatched` is a duplicate, listed with each dispatch's
 * workflow and run IDs. One pass, one page of the stream in memory at a time.
 */
export async function buildReport(raw: RawConnection, keys: FireOnceKeys, query: ReportQuery): Promise<Report> {
  const tally = new Tally(query.jobType);
  await readLog(raw, keys.log(), query.fromMs, query.toMs, (entry) => tally.add(entry));
  return tally.report({ prefix: keys.prefix, stream: keys.log(), ...query });
}

/** The counting itself, apart from Redis so that it is plain to test and to time. */
export class Tally {
  private events = 0;
  private readonly seen = new Set<string>();
  private readonly jobTypes = new Map<string, Counts>();
  private readonly scopes = new Map<string, { jobType: string; scope: string; counts: Counts }>();
  private readonly dispatched = new Map<string, { jobType: string; scope: string; step: string; rows: DispatchRow[] }>();
  /** Latest outcome per holder, to annotate the dispatches of duplicates. */
  private readonly outcomes = new Map<string, string>();

  constructor(private readonly jobTypeFilter?: string) {}

  add({ id, atMs, event }: LogEntry): void {
    if (this.jobTypeFilter !== undefined && event.jobType !== this.jobTypeFilter) return;
    const decision = String(event.decision);
    this.events++;
    this.seen.add(decision);
    bump(getOr(this.jobTypes, event.jobType, () => ({})), decision);
    const scopeKey = `${event.jobType}\u0000${event.scope}`;
    bump(getOr(this.scopes, scopeKey, () => ({ jobType: event.jobType, scope: event.scope, counts: {} })).counts, decision);
    if (event.holder !== undefined && OUTCOMES.has(decision)) this.outcomes.set(event.holder, decision);
    if (decision !== 'dispatched') return;
    const stepKey = `${scopeKey}\u0000${event.step}`;
    getOr(this.dispatched, stepKey, () => ({ jobType: event.jobType, scope: event.scope, step: event.step, rows: [] })).rows.push({
      id,
      at: new Date(atMs).toISOString(),
      workflowId: event.workflowId,
      runId: event.runId,
      activityId: event.activityId,
      attempt: event.attempt,
      holder: event.holder,
      fencingToken: event.fencingToken,
    });
  }

  report(meta: { prefix: string; stream: string; fromMs: number; toMs: number; jobType?: string }): Report {
    const duplicates: Duplicate[] = [];
    for (const group of this.dispatched.values()) {
      if (group.rows.length < 2) continue;
      // A guarded dispatch always has a holder; one without was recorded by `observeOnly`.
      for (const row of group.rows) row.outcome = row.holder === undefined ? 'observe-only' : this.outcomes.get(row.holder);
      duplicates.push({ jobType: group.jobType, scope: group.scope, step: group.step, dispatches: group.rows });
    }
    duplicates.sort((a, b) => b.dispatches.length - a.dispatches.length || a.scope.localeCompare(b.scope));
    const total = (counts: Counts) => Object.values(counts).reduce((sum, n) => sum + n, 0);
    const dispatchedOf = (counts: Counts) => counts.dispatched ?? 0;
    return {
      prefix: meta.prefix,
      stream: meta.stream,
      from: new Date(meta.fromMs).toISOString(),
      to: new Date(meta.toMs).toISOString(),
      ...(meta.jobType === undefined ? {} : { jobType: meta.jobType }),
      events: this.events,
      decisions: [...DECISION_ORDER.filter((d) => this.seen.has(d)), ...[...this.seen].filter((d) => !DECISION_ORDER.includes(d)).sort()],
      byJobType: [...this.jobTypes]
        .map(([jobType, counts]) => ({ jobType, counts, total: total(counts) }))
        .sort((a, b) => a.jobType.localeCompare(b.jobType)),
      byScope: [...this.scopes.values()]
        .map((s) => ({ ...s, total: total(s.counts) }))
        .sort((a, b) => dispatchedOf(b.counts) - dispatchedOf(a.counts) || b.total - a.total || a.scope.localeCompare(b.scope)),
      duplicates,
    };
  }
}

function bump(counts: Counts, decision: string): void {
  counts[decision] = (counts[decision] ?? 0) + 1;
}

function getOr<K, V>(map: Map<K, V>, key: K, make: () => V): V {
  let value = map.get(key);
  if (value === undefined) {
    value = make();
    map.set(key, value);
  }
  return value;
}
