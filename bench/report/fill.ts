import type { Redis } from 'ioredis';
import { DispatchLog, type Decision, type DispatchEvent, type FireOnceKeys } from '../../src/core';

/** What {@link fillLog} wrote, to check the report against. */
export interface Filled {
  readonly events: number;
  readonly scopes: number;
  /** Scopes given a second `dispatched`: what the report must flag, no more, no fewer. */
  readonly duplicatedScopes: number;
}

const JOB_TYPES = ['summary', 'report', 'email', 'embedding'] as const;

/** A small seeded PRNG (mulberry32), so that every run writes the same log. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Append `total` events to `<prefix>:log` through the library's own `DispatchLog`, as workers
 * do: per scope one `dispatched` and its `committed`, then `fast-forwarded` and
 * `in-flight-waited` entries from later runs; one scope in a hundred gets a second `dispatched`
 * (a duplicate). IDs only, as the real log: workflow, run and activity IDs, holder, fencing.
 */
export async function fillLog(redis: Redis, keys: FireOnceKeys, total: number, maxLen: number): Promise<Filled> {
  const log = new DispatchLog(redis, keys, maxLen);
  const rand = random(42);
  let events = 0;
  let scopes = 0;
  let duplicatedScopes = 0;
  const record = (event: DispatchEvent) => {
    log.record(event);
    events++;
  };
  while (events < total) {
    const scope = `session-${scopes++}`;
    const jobType = JOB_TYPES[scopes % JOB_TYPES.length];
    const base = { scope, step: `dispatch-${jobType}`, jobType, activityType: `dispatch${jobType}` };
    const run = (n: number) => ({ workflowId: `${scope}-msg-${n}`, runId: `run-${scopes}-${n}`, activityId: '1', attempt: 1 });
    const holder = (n: number) => (scopes * 1_000 + n).toString(16).padStart(12, '0');
    const dispatches = rand() < 0.01 && events + 4 <= total ? 2 : 1;
    if (dispatches === 2) duplicatedScopes++;
    for (let d = 1; d <= dispatches && events < total; d++) {
      record({ decision: 'dispatched', ...base, ...run(d), holder: holder(d), fencingToken: d });
      if (events < total) record({ decision: 'committed', ...base, ...run(d), holder: holder(d), fencingToken: d });
    }
    const later = 2 + Math.floor(rand() * 10);
    for (let n = 0; n < later && events < total; n++) {
      const decision: Decision = rand() < 0.8 ? 'fast-forwarded' : 'in-flight-waited';
      record({ decision, ...base, ...run(10 + n), fencingToken: dispatches });
    }
    // DispatchLog.record does not wait; a PING behind every few thousand appends lets them drain
    // in order on the one connection, and tells us when they are all in.
    if (scopes % 500 === 0) await log.flush();
  }
  await log.flush();
  if (log.dropped > 0) throw new Error(`${log.dropped} appends were refused while filling the log`);
  return { events, scopes, duplicatedScopes };
}
