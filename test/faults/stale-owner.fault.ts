import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { FireOnceKeys } from '../../src/core';
import { faultKeys } from './fixtures/activities';
import { recordResult } from '../support/faults/report';
import { FaultClient } from '../support/faults/temporal';
import { FAULT_PACE, waitFor } from '../support/wait';
import { startFaultWorker, stopAll, type FaultWorker } from '../support/faults/workers';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';
import { lockOf } from '../support/records';

// Fault 6, the stale owner (5 rounds): holder A's lease runs out while A is frozen (SIGSTOP on its worker
// process: a GC pause, a stalled VM), B takes the lock and dispatches, then A wakes up and fails.
// Expected: A's compare-and-delete release is refused and logged, B's lock survives, the
// downstream system refuses A's write by its lower fencing token, and both runs complete with
// B's result. Dispatches: 2 (A's, which went stale, and B's). A and B run on two task queues,
// one per worker, so that the frozen worker cannot be handed B's tasks.
const ROUNDS = 5;
const LEASE_MS = 2_000;
const STEP = 'fencedJob';

describe('a stale owner: A is frozen past its lease, B takes over, then A fails', () => {
  const prefix = testPrefix('stale');
  const queueA = `faults-stale-a-${randomUUID()}`;
  const queueB = `faults-stale-b-${randomUUID()}`;
  const keys = new FireOnceKeys(prefix);
  let redis: Redis;
  let client: FaultClient;
  let workerA: FaultWorker;
  let workerB: FaultWorker;

  beforeAll(async () => {
    redis = connectRedis();
    const env = {
      TEMPORAL_ADDRESS: process.env.TEMPORAL_ADDRESS as string,
      REDIS_URL: process.env.REDIS_URL as string,
      KEY_PREFIX: prefix,
      LEASE_MS: String(LEASE_MS),
      STICKY_TIMEOUT_MS: '1000',
      LOG_LEVEL: 'INFO',
    };
    [workerA, workerB] = await Promise.all([startFaultWorker({ ...env, TASK_QUEUE: queueA }), startFaultWorker({ ...env, TASK_QUEUE: queueB })]);
    client = await FaultClient.connect(process.env.TEMPORAL_ADDRESS as string);
  }, 180_000);

  afterAll(async () => {
    await stopAll([workerA, workerB].filter(Boolean));
    await client?.close();
    await deletePrefix(redis, prefix);
    await redis.quit();
  });

  /** One round on a fresh scope; returns the job's own dispatch count. */
  async function round(n: number): Promise<number> {
    const scope = `stale-${n}-${randomUUID()}`;
    const lockKey = keys.lock(scope, STEP);
    const dispatchLog = () => redis.lrange(faultKeys.dispatchLog(prefix, scope), 0, -1);
    const fenceLog = () => redis.lrange(faultKeys.fenceLog(prefix, scope), 0, -1);
    const logsBefore = workerA.logs().length;
    try {
      // A dispatches on worker A, writes 'start' downstream with its fencing token, and waits.
      const runA = await client.start(queueA, 'fencedRun', [scope, scope], `stale-A-${randomUUID()}`);
      await waitFor('A to dispatch', async () => (await dispatchLog()).length === 1, FAULT_PACE);
      const lockA = (await lockOf(redis, lockKey))!;
      const fenceA = lockA.fencingToken;
      expect(await dispatchLog()).toEqual([`${workerA.pid} ${fenceA}`]);
      expect(lockA.holder).toContain(runA.workflowId);

      // Freeze A's worker until its lease has run out.
      await workerA.signal('SIGSTOP');
      await waitFor("A's lease to run out while A is frozen", async () => (await redis.exists(lockKey)) === 0, { ...FAULT_PACE, timeoutMs: 30_000 });

      // B acquires (a greater fencing token), writes 'start' downstream and waits.
      const runB = await client.start(queueB, 'fencedRun', [scope, scope], `stale-B-${randomUUID()}`);
      await waitFor('B to dispatch', async () => (await dispatchLog()).length === 2, FAULT_PACE);
      const lockB = (await lockOf(redis, lockKey))!;
      const fenceB = lockB.fencingToken;
      expect(fenceB).toBeGreaterThan(fenceA);
      expect(await dispatchLog()).toEqual([`${workerA.pid} ${fenceA}`, `${workerB.pid} ${fenceB}`]);
      expect(lockB.holder).toContain(runB.workflowId);

      // A wakes up: its renewal finds the lock lost, its job stops and fails, and its release
      // must be refused.
      await workerA.signal('SIGCONT');
      const logged = () =>
        workerA
          .logs()
          .slice(logsBefore)
          .filter((l) => l.meta?.scope === scope);
      const refused = await waitFor("A's worker to log the refused release", async () => logged().find((l) => l.message.includes('lock release refused')), {
        ...FAULT_PACE,
        timeoutMs: 30_000,
      });
      expect(refused).toMatchObject({ level: 'WARN', meta: { scope, step: STEP, fencingToken: String(fenceA) } });
      expect(logged().find((l) => l.message.includes('lockLost'))).toMatchObject({ level: 'WARN', meta: { fencingToken: String(fenceA) } });

      // B's lock survived A's release, token and all.
      expect(await lockOf(redis, lockKey)).toEqual(lockB);
      // The downstream system took B's write and refused A's late one.
      expect(await fenceLog()).toEqual([`accepted start ${fenceA}`, `accepted start ${fenceB}`, `refused finish ${fenceA}`]);

      // B finishes; A's retry waits for B and fast-forwards to B's result.
      await redis.set(faultKeys.gate(prefix, scope), '1');
      const [resultA, resultB] = await client.results([runA, runB]);
      expect(resultB).toMatchObject({ counterId: scope, pid: workerB.pid, fencingToken: fenceB });
      expect(resultA).toEqual(resultB);
      expect(await fenceLog()).toEqual([`accepted start ${fenceA}`, `accepted start ${fenceB}`, `refused finish ${fenceA}`, `accepted finish ${fenceB}`]);
    } finally {
      workerA.child.kill('SIGCONT');
    }
    return Number(await redis.get(faultKeys.dispatches(prefix, scope)));
  }

  it(`${ROUNDS} rounds: refuses and logs A's release, keeps B's lock, fences A's write off, and both runs get B's result`, async () => {
    const started = Date.now();
    const counts: number[] = [];
    try {
      for (let n = 1; n <= ROUNDS; n++) counts.push(await round(n));
    } finally {
      recordResult({
        suite: 'stale owner',
        runs: `${counts.length} rounds x 2 runs of one scope`,
        dispatchesExpected: counts.length * 2,
        dispatchesSeen: counts.reduce((a, b) => a + b, 0),
        ms: Date.now() - started,
      });
    }
    expect(counts).toEqual(Array.from({ length: ROUNDS }, () => 2));
  }, 300_000);
});
