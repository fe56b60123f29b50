import { randomUUID } from 'node:crypto';
import { faultKeys } from './fixtures/activities';
import { recordResult } from '../support/faults/report';
import { useFaultWorkers } from '../support/faults/suite';
import { mapLimit } from '../support/wait';

// Fault 1, the race storm: many invocations of one step arrive at once, on two worker processes.
// Each round runs 200 scopes x 20 workflow runs; the 20 runs of a scope start together, so all
// but one of them arrive while the scope's job (500 ms) is in flight or just done. Expected:
// exactly one dispatch per scope, every run completes, and all 20 runs of a scope get that one
// dispatch's result.
// RACE_STORM_ROUNDS: 3 by default; RACE_STORM_SCOPES: 200 by default. .ci/run runs 1 round of
// 50 scopes (1,000 runs): each scope still sees its 20 runs race, which is the point.
const ROUNDS = Number(process.env.RACE_STORM_ROUNDS ?? 3);
const SCOPES = Number(process.env.RACE_STORM_SCOPES ?? 200);
const RUNS_PER_SCOPE = 20;
const JOB_MS = 500;
const SCOPES_IN_FLIGHT = 25;

describe(`race storm: ${SCOPES} scopes x 20 concurrent runs on 2 worker processes`, () => {
  const suite = useFaultWorkers('storm');

  /** One round: every scope's 20 runs start together; returns what it saw. */
  async function round(n: number): Promise<{ completed: number; dispatches: number; wrong: string[] }> {
    const { redis, client, taskQueue, prefix } = suite;
    const scopes = Array.from({ length: SCOPES }, (_, i) => `storm-r${n}-s${i}-${randomUUID()}`);
    // A scope's 20 runs start at once; 25 scopes are in flight at a time, so the dev server's
    // backlog stays bounded (4,000 runs queued at once starve it on 2 cores).
    const results = (
      await mapLimit(scopes, SCOPES_IN_FLIGHT, async (scope) => {
        const handles = await Promise.all(Array.from({ length: RUNS_PER_SCOPE }, () => client.start(taskQueue, 'quickRun', [scope, scope, JOB_MS])));
        return client.results(handles);
      })
    ).flat();
    const counts = (await redis.mget(scopes.map((s) => faultKeys.dispatches(prefix, s)))).map(Number);
    const wrong: string[] = [];
    scopes.forEach((scope, i) => {
      const mine = results.filter((r) => r.counterId === scope);
      const nonces = new Set(mine.map((r) => r.nonce)).size;
      if (counts[i] !== 1 || mine.length !== RUNS_PER_SCOPE || nonces !== 1) {
        wrong.push(`round ${n} ${scope}: ${counts[i]} dispatches, ${mine.length} results, ${nonces} distinct results`);
      }
    });
    return { completed: results.length, dispatches: counts.reduce((a, b) => a + b, 0), wrong };
  }

  it(`dispatches exactly ${SCOPES} times per round, ${ROUNDS} rounds, and every run completes with its scope's one result`, async () => {
    const started = Date.now();
    const rounds: Awaited<ReturnType<typeof round>>[] = [];
    try {
      for (let n = 1; n <= ROUNDS; n++) rounds.push(await round(n));
    } finally {
      recordResult({
        suite: 'race storm',
        runs: `${rounds.length} rounds x ${SCOPES} scopes x ${RUNS_PER_SCOPE} runs (${rounds.length * SCOPES * RUNS_PER_SCOPE} runs)`,
        dispatchesExpected: rounds.length * SCOPES,
        dispatchesSeen: rounds.reduce((sum, r) => sum + r.dispatches, 0),
        ms: Date.now() - started,
      });
    }
    expect(rounds.map((r) => ({ completed: r.completed, dispatches: r.dispatches }))).toEqual(
      Array.from({ length: ROUNDS }, () => ({ completed: SCOPES * RUNS_PER_SCOPE, dispatches: SCOPES })),
    );
    expect(rounds.flatMap((r) => r.wrong)).toEqual([]);
  }, 1_200_000); // generous: on a busy 2-core machine a round of 4,000 runs takes minutes
});
