import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { FireOnceKeys } from '../../src/core';
import { faultKeys } from './fixtures/activities';
import { recordResult } from '../support/faults/report';
import { OwnTemporal } from '../support/faults/services';
import { FaultClient } from '../support/faults/temporal';
import { waitFor } from '../support/faults/wait';
import { startFaultWorker, stopAll, type FaultWorker } from '../support/faults/workers';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';

// Fault 4, the Temporal server restarts mid-run: a dev server of the suite's own, on a fixed port
// with its state in a SQLite file (--db-filename), is stopped while 20 scopes' jobs are in flight
// and 4 more runs of each scope wait for them. The jobs finish while the server is away (their
// results reach Redis as artifacts; their completions cannot reach Temporal), then the server
// starts again on the same port and file. After the restart, one more run of each scope starts.
// Expected: every run completes, all 6 runs of a scope get the same result, and each scope
// dispatched exactly once.
const SCOPES = 20;
const RUNS_BEFORE = 5;
const STEP = 'gatedJob';

describe('the Temporal server restarts (file database) in the middle of a run', () => {
  const prefix = testPrefix('tmprl');
  const taskQueue = `faults-tmprl-${randomUUID()}`;
  const keys = new FireOnceKeys(prefix);
  let redis: Redis;
  let temporal: OwnTemporal;
  let client: FaultClient;
  let workers: FaultWorker[] = [];

  beforeAll(async () => {
    redis = connectRedis();
    temporal = await OwnTemporal.start();
    const env = { TEMPORAL_ADDRESS: temporal.address, REDIS_URL: process.env.REDIS_URL as string, TASK_QUEUE: taskQueue, KEY_PREFIX: prefix };
    workers = await Promise.all([startFaultWorker(env), startFaultWorker(env)]);
    client = await FaultClient.connect(temporal.address);
  }, 180_000);

  afterAll(async () => {
    await stopAll(workers);
    await client?.close();
    await temporal?.stop();
    await deletePrefix(redis, prefix);
    await redis.quit();
  });

  it('loses no run and dispatches nothing twice', async () => {
    const started = Date.now();
    const scopes = Array.from({ length: SCOPES }, () => `tmprl-${randomUUID()}`);
    const dispatches = async () => (await redis.mget(scopes.map((s) => faultKeys.dispatches(prefix, s)))).map(Number);
    try {
      const before = await Promise.all(
        scopes.flatMap((scope) => Array.from({ length: RUNS_BEFORE }, () => client.start(taskQueue, 'gatedRun', [scope, scope]))),
      );
      await waitFor(`all ${SCOPES} scopes to dispatch`, async () => (await dispatches()).every((n) => n === 1));

      await temporal.halt();
      // The jobs finish while the server is away: their artifacts land in Redis.
      await redis.mset(Object.fromEntries(scopes.map((s) => [faultKeys.gate(prefix, s), '1'])));
      await waitFor('every job to store its artifact', async () =>
        (await Promise.all(scopes.map((s) => redis.exists(keys.artifact(s, STEP))))).every((n) => n === 1),
      );
      await temporal.restart();

      const after = await Promise.all(scopes.map((scope) => client.start(taskQueue, 'gatedRun', [scope, scope])));
      const results = await client.results([...before, ...after]);
      expect(results).toHaveLength(SCOPES * (RUNS_BEFORE + 1));
      for (const scope of scopes) {
        const mine = results.filter((r) => r.counterId === scope);
        expect({ scope, runs: mine.length, distinctResults: new Set(mine.map((r) => r.nonce)).size }).toEqual({
          scope,
          runs: RUNS_BEFORE + 1,
          distinctResults: 1,
        });
      }
      expect(await dispatches()).toEqual(scopes.map(() => 1));
    } finally {
      recordResult({
        suite: 'Temporal restart',
        runs: `${SCOPES} scopes x ${RUNS_BEFORE + 1} runs (${SCOPES * (RUNS_BEFORE + 1)} runs)`,
        dispatchesExpected: SCOPES,
        dispatchesSeen: (await dispatches()).reduce((a, b) => a + b, 0),
        ms: Date.now() - started,
      });
    }
  }, 300_000);
});
