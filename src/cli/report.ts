import type { FireOnceKeys } from '../core/keys';
import type { RedisClient } from '../core/scripts';
import { readEntries, readLog, streamIdMs, type CountedFields, type LogEntry } from './log';

/** Counts per decision name. */
export type Counts = Record<string, number>;

/** Decisions in the order columns show them; any other name found in the log follows these. */
const DECISION_ORDER: readonly string[] = [
  'dispatched',
  'fast-forwarded',
  'in-flight-waited',
  'in-flight-parked',
  'in-flight-skipped',
  'in-flight-failed',
  'conflict',
  'committed',
  'commit-refused',
  'released-on-failure',
  'release-refused',
  'lock-lost',
  'release-forced',
  'invalidated',
];

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
  readonly outcome?: string;
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
  /** The namespace whose dispatch log this is: each namespace has its own. */
  readonly namespace: string;
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

/** Decisions that end a dispatch: the outcome shown beside each dispatch of a duplicate. */
const OUTCOMES = new Set(['committed', 'commit-refused', 'released-on-failure', 'release-refused', 'lock-lost', 'release-forced']);

/**
 * Read the namespace's log over the window, decoding only the fields counted by, and count
 * decisions per job type and per scope. A (scope, step) with more than one `dispatched` is a
 * duplicate; only its entries are then read in full, for their workflow and run IDs. One pass,
 * two pages of the stream in memory at a time.
 */
export async function buildReport(redis: RedisClient, keys: FireOnceKeys, query: ReportQuery): Promise<Report> {
  const tally = new Tally(query.jobType);
  await readLog(redis, keys.log(), query.fromMs, query.toMs, (id, fields) => tally.add(id, fields));
  // A dispatch's entry can land in the window after an invalidation that came after it, whose own
  // entry landed before the window: read the invalidations logged between the earliest fencing
  // token of a (scope, step) dispatched more than once and the window, or the two would pass for
  // a duplicate.
  const earliestMs = tally.earliestRepeatMs();
  if (earliestMs !== undefined && earliestMs < query.fromMs) {
    await readLog(redis, keys.log(), earliestMs, query.fromMs - 1, (id, fields) => tally.addEarlierInvalidation(id, fields));
  }
  const entries = await readEntries(redis, keys.log(), tally.duplicatedIds());
  return tally.report({ prefix: keys.prefix, namespace: keys.namespace, stream: keys.log(), ...query }, entries);
}

/** The counting itself, apart from Redis. */
class Tally {
  private readonly seen = new Set<string>();
  private readonly jobTypes = new Map<string, Counts>();
  /** Counts per job type, then per scope. */
  private readonly scopes = new Map<string, Map<string, Counts>>();
  /** `dispatched` entries per (job type, scope, step), in log order. */
  private readonly dispatched = new Map<string, StepDispatches>();
  /**
   * The Redis clock of each `invalidated` entry per (job type, scope), in log order: a dispatch
   * after one is a fresh start, not a duplicate.
   */
  private readonly invalidations = new Map<string, number[]>();
  /**
   * How many `invalidated` entries of each (job type, scope) were logged before the window (read
   * for their clocks only): every dispatch in the window is after them in the log.
   */
  private readonly earlier = new Map<string, number>();
  /** Latest outcome per holder, to annotate the dispatches of duplicates. */
  private readonly outcomes = new Map<string, string>();
  private groups: { jobType: string; scope: string; step: string; ids: string[] }[] | undefined;

  constructor(private readonly jobTypeFilter?: string) {}

  /** Count one entry; entries must come in log order (a later outcome replaces an earlier one). */
  add(id: string, { decision, scope, step, jobType, holder, fencingToken, redisTime }: CountedFields): void {
    if (this.jobTypeFilter !== undefined && jobType !== this.jobTypeFilter) return;
    this.seen.add(decision);
    bump(
      getOr(this.jobTypes, jobType, () => ({})),
      decision,
    );
    bump(
      getOr(
        getOr(this.scopes, jobType, () => new Map<string, Counts>()),
        scope,
        () => ({}),
      ),
      decision,
    );
    // JSON of the IDs, not the IDs joined by a separator: an ID may hold any character, NUL too, and
    // "j" + "a\0b" must never meet "j\0a" + "b".
    const artifact = JSON.stringify([jobType, scope]);
    if (decision === 'invalidated') this.invalidated(artifact, id, redisTime);
    else if (decision === 'dispatched') {
      const entries = getOr(this.dispatched, JSON.stringify([jobType, scope, step]), () => ({
        jobType,
        scope,
        step,
        artifact,
        ids: [],
        tokens: [],
        after: [],
      }));
      entries.ids.push(id);
      entries.tokens.push(fencingToken);
      entries.after.push(this.invalidations.get(artifact)?.length ?? 0);
    } else if (holder !== undefined && OUTCOMES.has(decision)) this.outcomes.set(holder, decision);
  }

  /**
   * The millisecond of the earliest fencing token among the dispatches of each (job type, scope,
   * step) dispatched more than once in the window, or `undefined` when there is none: an
   * invalidation logged before the window, but after that token, splits them.
   */
  earliestRepeatMs(): number | undefined {
    let earliest: number | undefined;
    for (const { ids, tokens } of this.dispatched.values()) {
      if (ids.length < 2) continue;
      for (const token of tokens) if (token !== undefined && (earliest === undefined || token < earliest)) earliest = token;
    }
    return earliest === undefined ? undefined : Math.floor(earliest / 1_000);
  }

  /** Take the clock of an `invalidated` entry logged before the window; every other entry there is ignored. */
  addEarlierInvalidation(id: string, { decision, scope, jobType, redisTime }: CountedFields): void {
    if (decision !== 'invalidated' || (this.jobTypeFilter !== undefined && jobType !== this.jobTypeFilter)) return;
    const artifact = JSON.stringify([jobType, scope]);
    this.invalidated(artifact, id, redisTime);
    this.earlier.set(artifact, (this.earlier.get(artifact) ?? 0) + 1);
    this.groups = undefined;
  }

  /** Keep the clock of an `invalidated` entry of (job type, scope) `artifact`. */
  private invalidated(artifact: string, id: string, redisTime: number | undefined): void {
    // An entry of 0.8.0 carries no clock: its stream ID's millisecond, a moment after its delete.
    getOr(this.invalidations, artifact, () => []).push(redisTime ?? streamIdMs(id) * 1_000);
  }

  /**
   * Each (job type, scope, step)'s dispatches between two invalidations of its (job type, scope),
   * once every entry is counted. A dispatch is placed by its fencing token, the Redis clock at its
   * acquire, against the invalidations' clocks: a worker's batch may land in the log after an
   * invalidation that came after its dispatch, or before one that came first. A dispatch with no
   * token (`observeOnly`) is placed by where its entry is in the log.
   */
  private dispatchGroups(): { jobType: string; scope: string; step: string; ids: string[] }[] {
    if (this.groups !== undefined) return this.groups;
    this.groups = [];
    for (const { jobType, scope, step, artifact, ids, tokens, after } of this.dispatched.values()) {
      const clocks = [...(this.invalidations.get(artifact) ?? [])].sort((a, b) => a - b);
      const byEpoch = new Map<number, string[]>();
      ids.forEach((id, i) => {
        const token = tokens[i];
        const epoch = token === undefined ? (this.earlier.get(artifact) ?? 0) + after[i] : countAtMost(clocks, token);
        getOr(byEpoch, epoch, () => []).push(id);
      });
      for (const group of byEpoch.values()) this.groups.push({ jobType, scope, step, ids: group });
    }
    return this.groups;
  }

  /** IDs of every `dispatched` entry of a (scope, step) dispatched more than once. */
  duplicatedIds(): string[] {
    return this.dispatchGroups()
      .filter((g) => g.ids.length > 1)
      .flatMap((g) => g.ids);
  }

  /** The report, with the duplicates' entries as read by their IDs. */
  report(meta: { prefix: string; namespace: string; stream: string; fromMs: number; toMs: number; jobType?: string }, entries: readonly LogEntry[]): Report {
    const byId = new Map(entries.map((e) => [e.id, e]));
    const duplicates: Duplicate[] = [];
    for (const group of this.dispatchGroups()) {
      if (group.ids.length < 2) continue;
      const rows = group.ids.flatMap((id) => {
        const entry = byId.get(id);
        return entry === undefined ? [] : [this.row(entry)];
      });
      duplicates.push({ jobType: group.jobType, scope: group.scope, step: group.step, dispatches: rows });
    }
    duplicates.sort((a, b) => b.dispatches.length - a.dispatches.length || a.scope.localeCompare(b.scope));
    const total = (counts: Counts) => Object.values(counts).reduce((sum, n) => sum + n, 0);
    const dispatchedOf = (counts: Counts) => counts.dispatched ?? 0;
    const byJobType = [...this.jobTypes]
      .map(([jobType, counts]) => ({ jobType, counts, total: total(counts) }))
      .sort((a, b) => a.jobType.localeCompare(b.jobType));
    return {
      prefix: meta.prefix,
      namespace: meta.namespace,
      stream: meta.stream,
      from: new Date(meta.fromMs).toISOString(),
      to: new Date(meta.toMs).toISOString(),
      ...(meta.jobType === undefined ? {} : { jobType: meta.jobType }),
      events: byJobType.reduce((sum, j) => sum + j.total, 0),
      decisions: [...DECISION_ORDER.filter((d) => this.seen.has(d)), ...[...this.seen].filter((d) => !DECISION_ORDER.includes(d)).sort()],
      byJobType,
      byScope: [...this.scopes]
        .flatMap(([jobType, scopes]) => [...scopes].map(([scope, counts]) => ({ jobType, scope, counts, total: total(counts) })))
        .sort((a, b) => dispatchedOf(b.counts) - dispatchedOf(a.counts) || b.total - a.total || a.scope.localeCompare(b.scope)),
      duplicates,
    };
  }

  private row({ id, atMs, event }: LogEntry): DispatchRow {
    return {
      id,
      at: new Date(atMs).toISOString(),
      workflowId: event.workflowId,
      runId: event.runId,
      activityId: event.activityId,
      attempt: event.attempt,
      holder: event.holder,
      fencingToken: event.fencingToken,
      // A guarded dispatch always has a holder; one without was recorded by `observeOnly`.
      outcome: event.holder === undefined ? 'observe-only' : this.outcomes.get(event.holder),
    };
  }
}

/**
 * One (job type, scope, step)'s `dispatched` entries, in log order: each one's ID, fencing token,
 * and how many `invalidated` entries of its (job type, scope) the log held before it.
 */
interface StepDispatches {
  readonly jobType: string;
  readonly scope: string;
  readonly step: string;
  /** JSON of (job type, scope), the key of its invalidations. */
  readonly artifact: string;
  readonly ids: string[];
  readonly tokens: (number | undefined)[];
  readonly after: number[];
}

/** How many of the sorted `clocks` are at most `token`: the invalidations a dispatch came after. */
function countAtMost(clocks: readonly number[], token: number): number {
  let low = 0;
  let high = clocks.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (clocks[mid] <= token) low = mid + 1;
    else high = mid;
  }
  return low;
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
