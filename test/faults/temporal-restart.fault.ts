import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { FireOnceKeys, parseEvent } from '../../src/core';
import { faultKeys } from './fixtures/activities';
import { recordResult } from '../support/faults/report';
import { OwnTemporal } from '../support/faults/services';
import { FaultClient } from '../support/faults/temporal';
import { FAULT_PACE, waitFor } from '../support/wait';
import { startFaultWorker, stopAll, type FaultWorker } from '../support/faults/workers';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';

// Fault 4, the Temporal server restarts mid-run: a dev server of the suite's own, on a fixed port
// with its state in a SQLite file (--db-filename), is stopped while 20 scopes' jobs are in flight
// and 4 more runs of each scope wait for them. The jobs finish while the server is away (their
// results reach Redis as artifacts; their completions cannot reach Temporal), then the server
// starts again on the same port and file. After the restart, one more run of each scope starts.
// Expected: every run completes, all 6 runs of a scope get the same result, and each scope
// dispatched exactly once.
//
// Then parked waiters when the holder's commit cannot reach Temporal: 5 scopes' jobs in flight
// with 4 more runs of each parked on their locks ('park', heartbeat timeout 3 s). The server is
// stopped, the jobs commit (their artifacts reach Redis, the commits take the waiter lists) and
// the hand-over's completion calls fail. It stays down for DOWN_MS, past the Temporal client's own
// retries, then starts again. Nothing hands the waiters over any more: their heartbeat timeouts
// end their attempts, and the retries fast-forward. Expected: every run completes, the 5 runs of
// a scope get one result, each scope dispatched exactly once, and a worker said (WARN) that a
// hand-over did not go through.
const SCOPES = 20;
const RUNS_BEFORE = 5;
const PARKED_SCOPES = 5;
const WAITERS = 4;
const DOWN_MS = 20_000;
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
      await waitFor(`all ${SCOPES} scopes to dispatch`, async () => (await dispatches()).every((n) => n === 1), FAULT_PACE);

      await temporal.halt();
      // The jobs finish while the server is away: their artifacts land in Redis.
      await redis.mset(Object.fromEntries(scopes.map((s) => [faultKeys.gate(prefix, s), '1'])));
      await waitFor(
        'every job to store its artifact',
        async () => (await Promise.all(scopes.map((s) => redis.exists(keys.artifact(s, STEP))))).every((n) => n === 1),
        FAULT_PACE,
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

  it("parked waiters whose holder commits while it is down: every run completes with its scope's one result, 1 dispatch each", async () => {
    const started = Date.now();
    const logsBefore = workers.map((w) => w.logs().length);
    const scopes = Array.from({ length: PARKED_SCOPES }, () => `parkdown-${randomUUID()}`);
    const dispatches = async () => (await redis.mget(scopes.map((s) => faultKeys.dispatches(prefix, s)))).map(Number);
    try {
      const holders = await Promise.all(scopes.map((scope) => client.start(taskQueue, 'parkedGatedRun', [scope, scope])));
      await waitFor(`all ${PARKED_SCOPES} scopes to dispatch`, async () => (await dispatches()).every((n) => n === 1), FAULT_PACE);
      const waiters = await Promise.all(
        scopes.flatMap((scope) => Array.from({ length: WAITERS }, () => client.start(taskQueue, 'parkedGatedRun', [scope, scope]))),
      );
      await waitFor(
        `${WAITERS} waiters parked on each scope`,
        async () => (await Promise.all(scopes.map((s) => redis.llen(keys.waiters(s, STEP))))).every((n) => n === WAITERS),
        FAULT_PACE,
      );

      await temporal.halt();
      await redis.mset(Object.fromEntries(scopes.map((s) => [faultKeys.gate(prefix, s), '1'])));
      // The commits land while the server is away, and take the waiter lists with them.
      await waitFor(
        'every job to commit',
        async () => {
          const states = await Promise.all(scopes.map(async (s) => [await redis.exists(keys.artifact(s, STEP)), await redis.llen(keys.waiters(s, STEP))]));
          return states.every(([artifact, parkedNow]) => artifact === 1 && parkedNow === 0);
        },
        FAULT_PACE,
      );
      await new Promise((r) => setTimeout(r, DOWN_MS));
      await temporal.restart();

      const results = await client.results([...holders, ...waiters]);
      for (const scope of scopes) {
        const mine = results.filter((r) => r.counterId === scope);
        expect({ scope, runs: mine.length, distinctResults: new Set(mine.map((r) => r.nonce)).size }).toEqual({ scope, runs: WAITERS + 1, distinctResults: 1 });
      }
      expect(await dispatches()).toEqual(scopes.map(() => 1));
      // The premise held: the waiters parked, and a hand-over did not reach Temporal.
      const parked = (await redis.xrange(keys.log(), '-', '+'))
        .map(([, fields]) => parseEvent(fields))
        .filter((e) => e.decision === 'in-flight-parked' && scopes.includes(e.scope));
      expect(parked.length).toBeGreaterThanOrEqual(PARKED_SCOPES * WAITERS);
      const warned = workers
        .flatMap((w, i) => w.logs().slice(logsBefore[i]))
        .filter((l) => l.level === 'WARN' && l.message.startsWith('fire-once: could not complete a parked waiter'));
      expect(warned.length).toBeGreaterThan(0);
    } finally {
      recordResult({
        suite: 'Temporal down at the hand-over',
        runs: `${PARKED_SCOPES} scopes x ${WAITERS + 1} runs (${PARKED_SCOPES * (WAITERS + 1)} runs), ${WAITERS} parked per scope, server down ${DOWN_MS / 1000} s`,
        dispatchesExpected: PARKED_SCOPES,
        dispatchesSeen: (await dispatches()).reduce((a, b) => a + b, 0),
        ms: Date.now() - started,
      });
    }
  }, 300_000);
});
