import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { FireOnceKeys, parseLock } from '../../src/core';
import { faultKeys } from './fixtures/activities';
import { recordResult } from '../support/faults/report';
import { FaultClient } from '../support/faults/temporal';
import { FAULT_PACE, waitFor } from '../support/wait';
import { startFaultWorker, stopAll, type FaultWorker, type FaultWorkerEnv } from '../support/faults/workers';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';

// Fault 2, a worker killed mid-dispatch: SIGKILL the worker process that is running a guarded
// dispatch, 20 times. Nothing releases the lock (the failure branch never runs), and nothing
// renews it either, so it lives at most one lease (2 s here). Expected, each time: no second
// dispatch while the dead holder's lease lives; exactly one re-dispatch after it expires, by
// another worker, driven by the activity's retry (heartbeat timeout 1 s); the run completes with
// that dispatch's result. So 2 dispatches per kill.
// WORKER_KILLS: 20 by default; .ci/run runs 10, each with every assertion.
const KILLS = Number(process.env.WORKER_KILLS ?? 20);
const LEASE_MS = 2_000;
const STEP = 'crashableJob';

interface Snapshot {
  readonly token: string | null;
  readonly dispatches: number;
}

describe('a worker SIGKILLed in the middle of a guarded dispatch', () => {
  const prefix = testPrefix('kill');
  const taskQueue = `faults-kill-${randomUUID()}`;
  const keys = new FireOnceKeys(prefix);
  let redis: Redis;
  let client: FaultClient;
  const workers: FaultWorker[] = [];
  const spawning = new Set<Promise<FaultWorker>>();
  let env: FaultWorkerEnv;

  const spawn = (): Promise<FaultWorker> => {
    const started = startFaultWorker(env).then((w) => {
      workers.push(w);
      return w;
    });
    spawning.add(started);
    void started.finally(() => spawning.delete(started)).catch(() => undefined);
    return started;
  };
  /** Wait until two workers are alive, starting one if none is on its way. */
  const twoAlive = async () => {
    while (workers.filter((w) => !w.exited).length < 2) await (spawning.size > 0 ? Promise.race(spawning) : spawn());
  };

  beforeAll(async () => {
    redis = connectRedis();
    env = {
      TEMPORAL_ADDRESS: process.env.TEMPORAL_ADDRESS as string,
      REDIS_URL: process.env.REDIS_URL as string,
      TASK_QUEUE: taskQueue,
      KEY_PREFIX: prefix,
      LEASE_MS: String(LEASE_MS),
      STICKY_TIMEOUT_MS: '1000',
    };
    // Three, so that a victim's replacement has a whole round to start before it is needed.
    await Promise.all([spawn(), spawn(), spawn()]);
    client = await FaultClient.connect(process.env.TEMPORAL_ADDRESS as string);
  }, 180_000);

  afterAll(async () => {
    await Promise.allSettled(spawning);
    await stopAll(workers);
    await client?.close();
    await deletePrefix(redis, prefix);
    await redis.quit();
  });

  /** The lock's token and the job's own dispatch count, read in one MULTI: a consistent pair. */
  async function snapshot(scope: string): Promise<Snapshot> {
    const [[, token], [, count]] = (await redis.multi().get(keys.lock(scope, STEP)).get(faultKeys.dispatches(prefix, scope)).exec()) as [
      [null, string | null],
      [null, string | null],
    ];
    return { token: token === null ? null : (parseLock(token)?.token ?? null), dispatches: Number(count ?? 0) };
  }

  it(`${KILLS} kills: no dispatch while the dead holder's lease lives, then exactly one re-dispatch, and every run completes`, async () => {
    const started = Date.now();
    const outcomes: { dispatches: number; violations: number; heldSnapshots: number; problems: string[] }[] = [];
    try {
      for (let i = 0; i < KILLS; i++) {
        // At least two live workers before each kill: a victim's replacement is started in the
        // background and only waited for here.
        await twoAlive();
        const scope = `kill-${i}-${randomUUID()}`;
        const handle = await client.start(taskQueue, 'crashableRun', [scope, scope]);
        const first = await waitFor(
          `the first dispatch of ${scope}`,
          async () => (await redis.lindex(faultKeys.dispatchLog(prefix, scope), 0)) ?? undefined,
          FAULT_PACE,
        );
        const [pid, fencing] = first.split(' ').map(Number);
        const victim = workers.find((w) => w.pid === pid);
        if (!victim) throw new Error(`dispatch ran in pid ${pid}, which is none of the workers (${workers.map((w) => w.pid).join(', ')})`);
        const deadToken = (await snapshot(scope)).token;
        await victim.signal('SIGKILL');
        void spawn();

        // While the dead holder's token is the lock, the job's counter must stay at 1.
        let violations = 0;
        let heldSnapshots = 0;
        for (;;) {
          const now = await snapshot(scope);
          if (now.token !== deadToken || deadToken === null) break;
          heldSnapshots++;
          if (now.dispatches !== 1) violations++;
          await new Promise((r) => setTimeout(r, 20));
        }

        const [result] = await client.results([handle]);
        const log = await redis.lrange(faultKeys.dispatchLog(prefix, scope), 0, -1);
        const dispatches = Number(await redis.get(faultKeys.dispatches(prefix, scope)));
        const problems: string[] = [];
        if (log.length !== 2) problems.push(`dispatch log ${JSON.stringify(log)}`);
        const [againPid, againFencing] = (log[1] ?? '0 0').split(' ').map(Number);
        if (againPid === pid) problems.push(`re-dispatched in the killed pid ${pid}`);
        if (!(againFencing > fencing)) problems.push(`re-dispatch fencing token ${againFencing}, expected more than ${fencing}`);
        if (result.pid !== againPid || result.fencingToken !== againFencing) problems.push(`result ${JSON.stringify(result)} is not the re-dispatch's`);
        outcomes.push({ dispatches, violations, heldSnapshots, problems });
      }
    } finally {
      recordResult({
        suite: 'worker killed',
        runs: `${outcomes.length} SIGKILLs, 1 run each`,
        dispatchesExpected: outcomes.length * 2,
        dispatchesSeen: outcomes.reduce((sum, o) => sum + o.dispatches, 0),
        ms: Date.now() - started,
      });
    }
    expect(outcomes.map((o) => o.dispatches)).toEqual(Array.from({ length: KILLS }, () => 2));
    expect(outcomes.map((o) => o.violations)).toEqual(Array.from({ length: KILLS }, () => 0));
    expect(outcomes.flatMap((o) => o.problems)).toEqual([]);
    // The check above saw the dead holder's lock alive, so it did test the window.
    expect(outcomes.reduce((sum, o) => sum + o.heldSnapshots, 0)).toBeGreaterThan(0);
  }, 600_000);
});
