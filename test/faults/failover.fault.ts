import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { FireOnceGuard, FireOnceStoreUnavailable, type DispatchTarget } from '../../src';
import { info, startSentinelGroup, type SentinelGroup } from '../support/cluster/sentinel';
import { FAILOVER_PACE, REPLICATION_PACE, waitFor } from '../support/wait';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';
import { recordResult } from '../support/faults/report';

// Failover right after acquires, with jobs in flight. A primary, one replica and three
// sentinels (all spawned here, no persistence); the guard reaches them through Sentinel with
// ioredis' failoverDetector, as docs/deployment.md recommends. Each trial sends SCOPES acquires for
// fresh scopes, 2 ms apart, "dispatches" every one it wins (an INCR on the suite's shared Redis,
// which the guard does not own) and never commits: the jobs are in flight. Once half of the
// acquires have answered, the primary is SIGKILLed; the rest fail closed. The sentinels promote
// the replica; then every dispatched scope is invoked again, and an invocation that acquires
// dispatches the job a second time. The killed node rejoins as a replica, and the next trial
// kills the new primary.
//
// Two replication links:
// - 'healthy': the replica is connected and keeps up. On loopback it receives each write about
//   as soon as the client gets its reply, so a process kill rarely finds a write it lacks.
// - 'partitioned': the link is cut just before the acquires (the replica frozen, its connection
//   killed on the primary), as in a network partition or a replica that fell behind; the primary
//   goes on granting locks that only it has, then dies.
//
// Each link runs twice: with replicaSync off, the duplicates counted are the hazard of
// asynchronous replication, printed and recorded; with it on (WAIT 1 behind every write), an
// acquire the replica has not acknowledged fails closed, and the test asserts 0 locks lost and 0
// duplicates. 'healthy' alone would prove little, since it shows ~0 even without replica sync.
const TRIALS = Number(process.env.FAILOVER_TRIALS ?? 50);
const SCOPES = 100;
const MODES = ['healthy', 'partitioned'] as const;
type Mode = (typeof MODES)[number];
const RUNS = MODES.flatMap((mode) => [false, true].map((sync) => [mode, sync] as const));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Trial {
  /** Acquires that won the lock before the kill: each dispatched its job once. */
  readonly dispatched: number;
  /** Acquires that failed closed (the primary was gone, or its reply was): nothing dispatched. */
  readonly failedClosed: number;
  /** Dispatched scopes whose lock the promoted replica did not have. */
  readonly locksLost: number;
  /** Scopes dispatched twice: the second invocation acquired. */
  readonly duplicates: number;
  /** From the kill to the client's first answer from the new primary. */
  readonly failoverMs: number;
  /** The replica's state and lag as the primary reported them before the acquires. */
  readonly linkAtStart: string;
  /**
   * What a sentinel said about the primary before the kill (`+sdown`, `+odown`, `+switch-master`):
   * a failover the kill did not cause, e.g. a PING answered late on a loaded machine. Such a
   * trial measures another hazard (a demoted primary's writes are lost) and is counted apart.
   */
  readonly before: readonly string[];
}

describe('Sentinel failover right after acquires, jobs in flight, with and without replica sync', () => {
  const prefix = testPrefix('failover');
  let group: SentinelGroup;
  let redis: Redis;
  let guard: FireOnceGuard;
  let synced: FireOnceGuard;
  let counters: Redis;
  const target = (scope: string): DispatchTarget => ({ scope, step: 'dispatch', jobType: 'job' });
  const dispatchKey = (scope: string) => `${prefix}:dispatches:${scope}`;
  const nodePort = async () => Number(/tcp_port:(\d+)/.exec(await redis.info('server'))?.[1]);

  beforeAll(async () => {
    // down-after 2 s rather than the helper's 1 s: on a loaded 2-core machine a PING answered more
    // than 1 s late made the sentinels fail over on their own in a few trials.
    group = await startSentinelGroup('failover-trials', { downAfterMs: 2000, failoverTimeoutMs: 2000 });
    redis = new Redis({ sentinels: [...group.sentinelAddresses], name: group.name, failoverDetector: true });
    redis.on('error', () => undefined);
    guard = new FireOnceGuard({ redis, keyPrefix: prefix, lockTtlMs: 600_000, storeTimeoutMs: 1_000, replicaSync: false });
    synced = new FireOnceGuard({ redis, keyPrefix: prefix, lockTtlMs: 600_000, storeTimeoutMs: 1_000, replicaSync: { replicas: 1, timeoutMs: 200 } });
    counters = connectRedis();
  }, 60_000);
  afterAll(async () => {
    redis?.disconnect();
    await group?.stop();
    if (counters) {
      await deletePrefix(counters, prefix);
      await counters.quit();
    }
  });

  /** Call `op` until it stops failing closed (the client is finding the new primary). */
  async function throughFailover<T>(op: () => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await op();
      } catch (err) {
        if (!(err instanceof FireOnceStoreUnavailable) || attempt > 300) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  async function trial(mode: Mode, sync: boolean, n: number): Promise<Trial> {
    const master = await group.masterPort();
    const replica = [group.master.port, group.replica.port].find((p) => p !== master) as number;
    await waitFor('the client to be on the primary', async () => (await nodePort()) === master, REPLICATION_PACE);
    const scopes = Array.from({ length: SCOPES }, (_, i) => `${mode}-${sync}-${n}-${i}-${randomUUID()}`);
    // A trial starts from a replica that is receiving the stream: a write it has acknowledged
    // (WAIT). "online" with lag 0 is not enough: after a diskless full sync (the default) the
    // primary reports the replica online at once but holds the stream until its first ACK, about
    // a second later; two earlier runs lost all 50 locks of a trial that started in that gap.
    const admin = group.connect(master);
    try {
      await admin.set(`${prefix}:link-check`, String(n));
      await waitFor(`the replica of ${master} to acknowledge a write`, async () => (await admin.wait(1, 1_000)) === 1, FAILOVER_PACE);
    } finally {
      admin.disconnect();
    }
    const link = async () => /slave0:[^\r\n]*state=(\w+)[^\r\n]*lag=(\d+)/.exec(await info(group.connect, master, 'replication'))?.slice(1) ?? ['none', '?'];
    const linkAtStart = (await link()).join(' lag ');
    const events: { at: number; what: string }[] = [];
    const watcher = group.connect(group.sentinels[0].port);
    watcher.on('pmessage', (_pattern: string, channel: string, message: string) => {
      const aboutMaster = channel === '+switch-master' || (['+sdown', '+odown'].includes(channel) && message.startsWith('master '));
      if (aboutMaster) events.push({ at: Date.now(), what: `${channel} ${message}` });
    });
    await watcher.psubscribe('*');
    const frozen = group.node(replica).child;
    if (mode === 'partitioned') {
      frozen.kill('SIGSTOP'); // so that it cannot reconnect
      const admin = group.connect(master);
      await admin.call('CLIENT', 'KILL', 'TYPE', 'replica').finally(() => admin.disconnect());
    }

    // Send the acquires 2 ms apart; SIGKILL the primary as soon as half of them have answered.
    const primary = group.node(master).child;
    const dead = new Promise<void>((resolve) => primary.once('exit', () => resolve()));
    let answered = 0;
    let killedAt = 0;
    const firsts = await Promise.all(
      scopes.map(async (scope, i) => {
        await sleep(2 * i);
        const outcome = await (sync ? synced : guard).acquire(target(scope)).catch((err: unknown) => err);
        if (++answered === SCOPES / 2) {
          primary.kill('SIGKILL');
          killedAt = Date.now();
          frozen.kill('SIGCONT');
        }
        if (outcome instanceof FireOnceStoreUnavailable) return 'failed closed';
        if (outcome instanceof Error) throw outcome;
        if ((outcome as { kind: string }).kind !== 'acquired') throw new Error(`fresh scope ${scope}: ${(outcome as { kind: string }).kind}`);
        await counters.incr(dispatchKey(scope)); // the dispatch: the job is in flight, never committed
        return 'dispatched';
      }),
    );
    await dead;
    const dispatched = scopes.filter((_, i) => firsts[i] === 'dispatched');

    await waitFor(`the sentinels to promote ${replica}`, async () => (await group.masterPort()) === replica, FAILOVER_PACE);
    await throughFailover(async () => {
      if ((await nodePort()) !== replica) throw new FireOnceStoreUnavailable('not on the new primary yet');
    });
    const failoverMs = Date.now() - killedAt;

    // What the promoted replica has, read directly; then the second invocations, through the guard
    // without replica sync: the new primary has no replica until the trial ends, and the question
    // is only whether its lock survived.
    const direct = group.connect(replica);
    const present = await Promise.all(dispatched.map((scope) => direct.exists(guard.keys.lock(scope, 'dispatch')))).finally(() => direct.disconnect());
    const seconds = await Promise.all(
      dispatched.map(async (scope) => {
        const outcome = await throughFailover(() => guard.acquire(target(scope)));
        if (outcome.kind === 'acquired') await counters.incr(dispatchKey(scope)); // dispatched again
        return outcome.kind;
      }),
    );
    const counts = dispatched.length === 0 ? [] : (await counters.mget(dispatched.map(dispatchKey))).map(Number);
    // Two observations that the guard does not share: the store says which locks were lost, the
    // counters say which jobs ran twice. They must agree, scope by scope.
    expect(seconds).toEqual(present.map((p) => (p === 1 ? 'held' : 'acquired')));
    expect(counts).toEqual(present.map((p) => (p === 1 ? 1 : 2)));

    watcher.disconnect();
    await group.rejoin(master, replica);
    return {
      dispatched: dispatched.length,
      failedClosed: firsts.filter((f) => f === 'failed closed').length,
      locksLost: present.filter((p) => p === 0).length,
      duplicates: counts.filter((c) => c > 1).length,
      failoverMs,
      linkAtStart,
      before: events.filter((e) => e.at < killedAt).map((e) => e.what),
    };
  }

  it.each(RUNS)(
    `replication link %s, replica sync %s: ${TRIALS} trials of ${SCOPES} acquires, the primary SIGKILLed after half answered; duplicate dispatches counted`,
    async (mode, sync) => {
      const started = Date.now();
      const trials: Trial[] = [];
      const label = `${mode} link, ${sync ? 'replica sync on' : 'no replica sync'}`;
      for (let n = 0; n < TRIALS; n++) {
        const t = await trial(mode, sync, n);
        trials.push(t);
        process.stdout.write(
          `failover (${label}) trial ${n + 1}/${TRIALS}: ${t.dispatched} dispatched before the kill, ${t.failedClosed} failed closed, ` +
            `${t.locksLost} lock(s) lost, ${t.duplicates} duplicate dispatch(es), new primary after ${(t.failoverMs / 1000).toFixed(1)} s ` +
            `(replica ${t.linkAtStart} before the acquires${t.before.length > 0 ? `; before the kill a sentinel said: ${t.before.join(' | ')}` : ''})\n`,
        );
      }
      const sum = (key: 'dispatched' | 'failedClosed' | 'locksLost' | 'duplicates', of = trials) => of.reduce((total, t) => total + t[key], 0);
      const clean = trials.filter((t) => t.before.length === 0);
      const disturbed = trials.filter((t) => t.before.length > 0);
      process.stdout.write(
        `FAILOVER ${label}: ${sum('duplicates')} duplicate dispatch(es) of ${sum('dispatched')} jobs in flight, ` +
          `in ${trials.filter((t) => t.duplicates > 0).length} of ${TRIALS} trials; ${sum('failedClosed')} acquires failed closed. ` +
          `Trials with a failover the kill did not cause: ${disturbed.length}, with ${sum('duplicates', disturbed)} of the duplicates; ` +
          `the other ${clean.length}: ${sum('duplicates', clean)} duplicate(s) of ${sum('dispatched', clean)} jobs\n`,
      );
      recordResult({
        suite: `Sentinel failover right after acquires, ${label}${sync ? '' : ' (duplicates are the hazard)'}`,
        runs: `${TRIALS} trials x ${SCOPES} acquires`,
        dispatchesExpected: sum('dispatched'),
        dispatchesSeen: sum('dispatched') + sum('duplicates'),
        ms: Date.now() - started,
      });
      expect(trials).toHaveLength(TRIALS);
      if (sync) {
        // The guarantee: no lock a failover can lose, so no job dispatched twice. With the link cut
        // before the acquires, every one fails closed: nothing is dispatched at all.
        expect(trials.map((t) => [t.locksLost, t.duplicates])).toEqual(trials.map(() => [0, 0]));
        if (mode === 'partitioned') expect(sum('dispatched')).toBe(0);
      }
      // Jobs were in flight when the primary died (with sync on, only while the link was up).
      if (!sync || mode === 'healthy') expect(trials.every((t) => t.dispatched > 0)).toBe(true);
    },
    3_600_000,
  );
});
