import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { DispatchLog, FireOnceKeys, parseEvent, type DispatchEvent } from '../../src/core';
import { PAGE_SIZE } from '../../src/cli/log';
import { buildReport, type Counts } from '../../src/cli/report';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';

// `fire-once report` reads the log through its own RESP reader, decoding only the fields it
// counts by, and reads the duplicates' entries in full afterwards. Here its counts and duplicates
// are compared with a plain count over the same entries read back through ioredis, on random logs.
jest.setTimeout(300_000);

const DECISIONS = ['dispatched', 'fast-forwarded', 'in-flight-waited', 'committed', 'released-on-failure', 'lock-lost', 'release-forced'] as const;

const eventArb: fc.Arbitrary<DispatchEvent> = fc.record({
  decision: fc.constantFrom(...DECISIONS),
  scope: fc.constantFrom('s1', 's2', 's3', 'sé', '1'),
  step: fc.constantFrom('a', 'b'),
  jobType: fc.constantFrom('j', 'k', ''),
  holder: fc.option(fc.constantFrom('h1', 'h2', 'h3'), { nil: undefined }),
  runId: fc.option(fc.constantFrom('r1', 'r2'), { nil: undefined }),
});

/** The report's counts, the slow way: every entry read back and counted in plain code. */
function expected(entries: [string, string[]][], jobType: string | undefined) {
  const byScope: Record<string, Counts> = {};
  const dispatches = new Map<string, string[]>();
  const outcomes = new Map<string, string>();
  for (const [id, fields] of entries) {
    const e = parseEvent(fields);
    if (jobType !== undefined && e.jobType !== jobType) continue;
    const key = `${e.jobType}/${e.scope}`;
    byScope[key] ??= {};
    byScope[key][e.decision] = (byScope[key][e.decision] ?? 0) + 1;
    if (e.decision === 'dispatched') dispatches.set(`${key}/${e.step}`, [...(dispatches.get(`${key}/${e.step}`) ?? []), id]);
    else if (e.holder !== undefined && ['committed', 'released-on-failure', 'release-refused', 'lock-lost', 'release-forced'].includes(e.decision))
      outcomes.set(e.holder, e.decision);
  }
  const byId = new Map(entries.map(([id, fields]) => [id, parseEvent(fields)]));
  const duplicates = [...dispatches.entries()]
    .filter(([, ids]) => ids.length > 1)
    .map(([key, ids]) => ({
      key,
      rows: ids.map((id) => ({
        id,
        runId: byId.get(id)?.runId,
        outcome: byId.get(id)?.holder === undefined ? 'observe-only' : outcomes.get(byId.get(id)?.holder as string),
      })),
    }))
    .sort((a, b) => a.key.localeCompare(b.key));
  return { byScope, duplicates };
}

describe('fire-once report: server-side counts', () => {
  let redis: Redis;
  const prefixes: string[] = [];
  beforeAll(() => {
    redis = connectRedis();
  });
  afterAll(async () => {
    for (const prefix of prefixes) await deletePrefix(redis, prefix);
    await redis.quit();
  });

  async function logOf(events: readonly DispatchEvent[]): Promise<FireOnceKeys> {
    const prefix = testPrefix('report');
    prefixes.push(prefix);
    const keys = new FireOnceKeys(prefix);
    const log = new DispatchLog(redis, keys, 1_000_000);
    for (const event of events) log.record(event);
    await log.flush();
    expect(log.dropped).toBe(0);
    return keys;
  }

  async function compare(keys: FireOnceKeys, jobType: string | undefined): Promise<void> {
    const entries = (await redis.xrange(keys.log(), '-', '+')) as [string, string[]][];
    const report = await buildReport(redis, keys, { fromMs: 0, toMs: Date.now() + 1_000, ...(jobType === undefined ? {} : { jobType }) });
    const want = expected(entries, jobType);
    expect(Object.fromEntries(report.byScope.map((s) => [`${s.jobType}/${s.scope}`, s.counts]))).toEqual(want.byScope);
    const got = report.duplicates
      .map((d) => ({ key: `${d.jobType}/${d.scope}/${d.step}`, rows: d.dispatches.map((r) => ({ id: r.id, runId: r.runId, outcome: r.outcome })) }))
      .sort((a, b) => a.key.localeCompare(b.key));
    expect(got).toEqual(want.duplicates);
    expect(report.events).toBe(Object.values(want.byScope).reduce((sum, c) => sum + Object.values(c).reduce((a, b) => a + b, 0), 0));
  }

  it('agrees with a plain count of the entries on random logs, with and without --job-type', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(eventArb, { maxLength: 200 }), fc.option(fc.constantFrom('j', 'k', ''), { nil: undefined }), async (events, jobType) => {
        await compare(await logOf(events), jobType);
      }),
      { numRuns: 40 },
    );
  });

  it('takes an invalidation logged just before the window into account: a dispatch before it whose entry landed in the window is no duplicate of one after it', async () => {
    const prefix = testPrefix('report-earlier');
    prefixes.push(prefix);
    const keys = new FireOnceKeys(prefix);
    const fromMs = Date.now() - 60_000; // the window starts here
    const add = (atMs: number, fields: Record<string, string>) =>
      redis.xadd(keys.log(), `${atMs}-0`, ...Object.entries({ scope: 's1', step: 'x', jobType: 'summary', ...fields }).flat());
    // In log order: the invalidation (its clock 1 s before the window), then two dispatches whose
    // batches landed in the window: one acquired before the invalidation, one after it.
    await add(fromMs - 1_000, { decision: 'invalidated', redisTime: String((fromMs - 1_000) * 1_000) });
    await add(fromMs + 10, { decision: 'dispatched', holder: 'h1', fencingToken: String((fromMs - 2_000) * 1_000), workflowId: 'before' });
    await add(fromMs + 20, { decision: 'dispatched', holder: 'h2', fencingToken: String((fromMs - 500) * 1_000), workflowId: 'after' });
    const report = await buildReport(redis, keys, { fromMs, toMs: Date.now() + 1_000 });
    expect(report.duplicates).toEqual([]);
    expect(report.byScope.map((s) => s.counts)).toEqual([{ dispatched: 2 }]); // the invalidation itself is outside the window

    // Another dispatch after the invalidation is a duplicate of the second; an invalidation of another scope splits nothing.
    await add(fromMs + 30, { decision: 'dispatched', holder: 'h3', fencingToken: String((fromMs - 400) * 1_000), workflowId: 'after-again' });
    await add(fromMs + 40, { decision: 'invalidated', scope: 's2', redisTime: String((fromMs - 450) * 1_000) });
    const again = await buildReport(redis, keys, { fromMs, toMs: Date.now() + 1_000 });
    expect(again.duplicates.map((d) => d.dispatches.map((r) => r.workflowId))).toEqual([['after', 'after-again']]);

    // An observeOnly dispatch (no fencing token) is placed by the log: after every invalidation logged before the window.
    await add(fromMs + 50, { decision: 'invalidated', scope: 's3', redisTime: String((fromMs - 2_000) * 1_000) });
    await add(fromMs + 60, { decision: 'dispatched', scope: 's3', holder: 'h4', fencingToken: String((fromMs - 1_500) * 1_000), workflowId: 'guarded' });
    await add(fromMs + 70, { decision: 'dispatched', scope: 's3', workflowId: 'observed' });
    const laterWindow = await buildReport(redis, keys, { fromMs: fromMs + 55, toMs: Date.now() + 1_000 });
    expect(laterWindow.duplicates.map((d) => d.dispatches.map((r) => r.workflowId))).toEqual([['guarded', 'observed']]);
  });

  it('agrees across pages: a log of several pages, whose duplicates span page boundaries', async () => {
    const events = fc.sample(eventArb, { numRuns: PAGE_SIZE * 2 + 1_234, seed: 42 });
    await compare(await logOf(events), undefined);
  });
});
