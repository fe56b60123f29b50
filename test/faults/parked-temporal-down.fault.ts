import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { FireOnceKeys, parseEvent } from '../../src/core';
import { faultKeys } from './fixtures/activities';
import { recordResult } from '../support/faults/report';
import { OwnTemporal } from '../support/faults/services';
import { FaultClient } from '../support/faults/temporal';
import { waitFor } from '../support/faults/wait';
import { startFaultWorker, stopAll, type FaultWorker } from '../support/faults/workers';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';

// Parked waiters when the holder's commit cannot reach Temporal: 5 scopes' jobs are in flight on
// the suite's own dev server (state in a SQLite file), with 4 more runs of each scope parked on
// their locks ('park', heartbeat timeout 3 s), over two worker processes. The server is stopped,
// the jobs finish and commit (their artifacts reach Redis, the commits take the waiter lists),
// and the hand-over's completion calls fail. The server stays down for DOWN_MS, past the Temporal
// client's own retries, then starts again on the same port and file. Nothing hands the waiters
// over any more: their heartbeat timeouts end their attempts, and the retries fast-forward.
// Expected: every run completes, the 5 runs of a scope get one result, each scope dispatched
// exactly once, and the workers said (WARN) that a hand-over did not go through.
const SCOPES = 5;
const WAITERS = 4;
const DOWN_MS = 20_000;
const STEP = 'gatedJob';

describe("Temporal unreachable when the holder's commit hands over its parked waiters", () => {
  const prefix = testPrefix('parkdown');
  const taskQueue = `faults-parkdown-${randomUUID()}`;
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

  it('every run completes with its scope’s one result; nothing is dispatched twice', async () => {
    const started = Date.now();
    const scopes = Array.from({ length: SCOPES }, () => `parkdown-${randomUUID()}`);
    const dispatches = async () => (await redis.mget(scopes.map((s) => faultKeys.dispatches(prefix, s)))).map(Number);
    try {
      const holders = await Promise.all(scopes.map((scope) => client.start(taskQueue, 'parkedGatedRun', [scope, scope])));
      await waitFor(`all ${SCOPES} scopes to dispatch`, async () => (await dispatches()).every((n) => n === 1));
      const waiters = await Promise.all(
        scopes.flatMap((scope) => Array.from({ length: WAITERS }, () => client.start(taskQueue, 'parkedGatedRun', [scope, scope]))),
      );
      await waitFor(`${WAITERS} waiters parked on each scope`, async () =>
        (await Promise.all(scopes.map((s) => redis.llen(keys.waiters(s, STEP))))).every((n) => n === WAITERS),
      );

      await temporal.halt();
      await redis.mset(Object.fromEntries(scopes.map((s) => [faultKeys.gate(prefix, s), '1'])));
      // The commits land while the server is away, and take the waiter lists with them.
      await waitFor('every job to commit', async () => {
        const states = await Promise.all(scopes.map(async (s) => [await redis.exists(keys.artifact(s, STEP)), await redis.llen(keys.waiters(s, STEP))]));
        return states.every(([artifact, parkedNow]) => artifact === 1 && parkedNow === 0);
      });
      await new Promise((r) => setTimeout(r, DOWN_MS));
      await temporal.restart();

      const results = await client.results([...holders, ...waiters]);
      for (const scope of scopes) {
        const mine = results.filter((r) => r.counterId === scope);
        expect({ scope, runs: mine.length, distinctResults: new Set(mine.map((r) => r.nonce)).size }).toEqual({ scope, runs: WAITERS + 1, distinctResults: 1 });
      }
      expect(await dispatches()).toEqual(scopes.map(() => 1));
      // The premise held: the waiters parked, and a hand-over did not reach Temporal.
      const parked = (await redis.xrange(keys.log(), '-', '+')).map(([, fields]) => parseEvent(fields)).filter((e) => e.decision === 'in-flight-parked');
      expect(parked.length).toBeGreaterThanOrEqual(SCOPES * WAITERS);
      const warned = workers
        .flatMap((w) => w.logs())
        .filter((l) => l.level === 'WARN' && l.message.startsWith('fire-once: could not complete a parked waiter'));
      expect(warned.length).toBeGreaterThan(0);
    } finally {
      recordResult({
        suite: 'Temporal down at the hand-over',
        runs: `${SCOPES} scopes x ${WAITERS + 1} runs (${SCOPES * (WAITERS + 1)} runs), ${WAITERS} parked per scope, server down ${DOWN_MS / 1000} s`,
        dispatchesExpected: SCOPES,
        dispatchesSeen: (await dispatches()).reduce((a, b) => a + b, 0),
        ms: Date.now() - started,
      });
    }
  }, 300_000);
});
