import { randomUUID } from 'node:crypto';
import { faultKeys } from './fixtures/activities';
import { recordResult } from '../support/faults/report';
import { useFaultWorkers } from '../support/faults/suite';

// Fault 5, overlapping attempts: start-to-close (2 s) is shorter than the job (5 s), with
// retries. Temporal times attempt 1 out, but a timeout does not stop the job, which is still
// running when attempt 2, 3, ... start, on either worker process. Expected: one dispatch per run,
// and the result of that one dispatch delivered to the workflow by a later attempt.
const RUNS = 10;
const JOB_MS = 5_000;

describe('overlapping attempts: start-to-close shorter than the job, with retries', () => {
  const suite = useFaultWorkers('overlap');

  it(`${RUNS} runs, each with attempts that overlap its still-running job: 1 dispatch each, and the result is delivered`, async () => {
    const { redis, client, taskQueue, prefix } = suite;
    const started = Date.now();
    const scopes = Array.from({ length: RUNS }, () => `overlap-${randomUUID()}`);
    const dispatches = async () => (await redis.mget(scopes.map((s) => faultKeys.dispatches(prefix, s)))).map(Number);
    try {
      const handles = await Promise.all(scopes.map((scope) => client.start(taskQueue, 'overlapRun', [scope, scope, JOB_MS])));
      const results = await client.results(handles);
      expect(await dispatches()).toEqual(scopes.map(() => 1));
      // The delivered result is the one dispatch's (its pid and fencing token are in the log).
      const logs = await Promise.all(scopes.map((s) => redis.lrange(faultKeys.dispatchLog(prefix, s), 0, -1)));
      expect(results.map((r) => [r.counterId, `${r.pid} ${r.fencingToken}`])).toEqual(scopes.map((s, i) => [s, logs[i][0]]));
      // The attempts did overlap: the completing attempt is a later one, started after attempt 1
      // had timed out while its job (5 s) kept running.
      const attempts = await Promise.all(handles.map((h) => client.completedAttempt(h)));
      expect(attempts.filter((a) => a < 2)).toEqual([]);
    } finally {
      recordResult({
        suite: 'overlapping attempts',
        runs: `${RUNS} runs`,
        dispatchesExpected: RUNS,
        dispatchesSeen: (await dispatches()).reduce((a, b) => a + b, 0),
        ms: Date.now() - started,
      });
    }
  }, 180_000);
});
