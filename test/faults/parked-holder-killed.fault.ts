import { randomUUID } from 'node:crypto';
import { FireOnceKeys } from '../../src/core';
import { faultKeys, type JobResult } from './fixtures/activities';
import { recordResult } from '../support/faults/report';
import { useFaultWorkers } from '../support/faults/suite';
import { FAULT_PACE, waitFor } from '../support/wait';

// Parked waiters when the holder dies: SIGKILL the worker process running a guarded dispatch
// while 20 other runs of the scope are parked on its lock ('park', the default), spread over
// three worker processes. Nothing commits or releases, so nothing hands the waiters over: the
// lock expires with its lease (2 s), and the workers that parked them notice (reap.lua, every
// poll interval) and fail them retryably at once; waiters parked on the killed process end by
// their heartbeat timeout (1 s) instead. Expected, each time: exactly one re-dispatch, and every
// run (the holder's and the 20 waiters') completes with its result, within the lease plus
// BOUND_MS of the kill (heartbeat timeout 1 s + retry interval up to 2 s + poll and slack).
const TRIALS = 5;
const WAITERS = 20;
const LEASE_MS = 2_000;
const BOUND_MS = 10_000;
const STEP = 'crashableJob';

describe('the holder SIGKILLed while waiters are parked on its lock', () => {
  const suite = useFaultWorkers('parkkill', { count: 3, env: { LEASE_MS: String(LEASE_MS), STICKY_TIMEOUT_MS: '1000' } });
  const alive = () => suite.workers.filter((w) => !w.exited);

  it(`${TRIALS} kills with ${WAITERS} parked waiters: exactly one re-dispatch, every run completes within the lease + ${BOUND_MS} ms`, async () => {
    const { redis, client, taskQueue, prefix, workers } = suite;
    const keys = new FireOnceKeys(prefix);
    const started = Date.now();
    const outcomes: { dispatches: number; parked: number; slowestMs: number; problems: string[] }[] = [];
    try {
      for (let i = 0; i < TRIALS; i++) {
        while (alive().length < 3) await suite.spawn();
        const scope = `parkkill-${i}-${randomUUID()}`;
        const holder = await client.start(taskQueue, 'crashableRun', [scope, scope]);
        const first = await waitFor(
          `the first dispatch of ${scope}`,
          async () => (await redis.lindex(faultKeys.dispatchLog(prefix, scope), 0)) ?? undefined,
          FAULT_PACE,
        );
        const [pid] = first.split(' ').map(Number);
        const victim = workers.find((w) => w.pid === pid);
        if (!victim) throw new Error(`dispatch ran in pid ${pid}, which is none of the workers`);
        const waiters = await Promise.all(Array.from({ length: WAITERS }, () => client.start(taskQueue, 'crashableRun', [scope, scope])));
        const parked = await waitFor(
          `${WAITERS} waiters parked`,
          async () => {
            const n = await redis.llen(keys.waiters(scope, STEP));
            return n >= WAITERS ? n : undefined;
          },
          FAULT_PACE,
        );
        await victim.signal('SIGKILL');
        const killedAt = Date.now();
        const finished = await Promise.all([holder, ...waiters].map(async (h) => ({ result: (await client.results([h]))[0], ms: Date.now() - killedAt })));
        const log = await redis.lrange(faultKeys.dispatchLog(prefix, scope), 0, -1);
        const dispatches = Number(await redis.get(faultKeys.dispatches(prefix, scope)));
        const problems: string[] = [];
        if (log.length !== 2) problems.push(`dispatch log ${JSON.stringify(log)}`);
        const [againPid, againFencing] = (log[1] ?? '0 0').split(' ').map(Number);
        const wrong = finished.filter(({ result }: { result: JobResult }) => result.pid !== againPid || result.fencingToken !== againFencing);
        if (wrong.length > 0) problems.push(`${wrong.length} runs got another result than the re-dispatch's`);
        const slowestMs = Math.max(...finished.map((f) => f.ms));
        if (slowestMs > LEASE_MS + BOUND_MS) problems.push(`a run completed ${slowestMs} ms after the kill`);
        outcomes.push({ dispatches, parked, slowestMs, problems });
      }
    } finally {
      recordResult({
        suite: 'holder killed, waiters parked',
        runs: `${outcomes.length} SIGKILLs, ${WAITERS + 1} runs each; slowest ${Math.max(0, ...outcomes.map((o) => o.slowestMs))} ms after the kill`,
        dispatchesExpected: outcomes.length * 2,
        dispatchesSeen: outcomes.reduce((sum, o) => sum + o.dispatches, 0),
        ms: Date.now() - started,
      });
      process.stdout.write(`parked-holder-killed: ${JSON.stringify(outcomes)}\n`);
    }
    expect(outcomes.map((o) => o.dispatches)).toEqual(Array.from({ length: TRIALS }, () => 2));
    expect(outcomes.flatMap((o) => o.problems)).toEqual([]);
  }, 600_000);
});
