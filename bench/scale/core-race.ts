/**
 * The core guard alone, no Temporal: K scopes, each raced by `racers` invocations at once, split
 * over two clients ("workers") with a WakeHub each. An invocation does what the activity
 * interceptor does: acquire; if held, wait (pub/sub wake-ups, polling as the fallback); if
 * acquired, run the job (INCR the scope's counter, sleep `jobMs`) and commit.
 */
import { randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { FireOnceGuard, type DispatchTarget } from '../../src';
import { WakeHub, waitForTurn } from '../../src/core';
import { dispatchCounterKey, tallyDispatches, type DispatchTally } from './counts';
import { forEachLimited } from './pool';
import { deletePrefix, type Store } from './stores';

/** One measured run. */
export interface RaceResult extends DispatchTally {
  readonly mode: 'core' | 'e2e';
  readonly store: string;
  readonly racers: number;
  readonly invocations: number;
  readonly wallMs: number;
  /** Invocations that ended in an error (not counted as dispatches); must be 0. */
  readonly failed: number;
}

export interface CoreRaceConfig {
  readonly scopes: number;
  readonly racers: number;
  readonly jobMs: number;
  /** Scopes raced at the same time. */
  readonly concurrency: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function coreRace(store: Store, config: CoreRaceConfig): Promise<RaceResult> {
  const prefix = `bench-scale-${randomBytes(4).toString('hex')}`;
  const clients = [store.connect(), store.connect()];
  const hubs = clients.map((c) => new WakeHub(c));
  const guards = clients.map((redis) => new FireOnceGuard({ redis, keyPrefix: prefix, lockTtlMs: 60_000, artifactTtlMs: 600_000 }));
  const scopes = Array.from({ length: config.scopes }, (_, i) => `s${i}-${randomBytes(3).toString('hex')}`);
  let failed = 0;

  const invoke = async (worker: number, scope: string): Promise<void> => {
    const guard = guards[worker];
    const target: DispatchTarget = { scope, step: 'dispatch', jobType: 'job' };
    let outcome = await guard.acquire(target);
    if (outcome.kind === 'held') {
      outcome = await waitForTurn(guard, target, outcome, {}, { pollIntervalMs: 250, deadline: Date.now() + 120_000, wake: hubs[worker] });
    }
    if (outcome.kind !== 'acquired') return;
    await (clients[worker] as Redis | Cluster).incr(dispatchCounterKey(prefix, scope));
    await sleep(config.jobMs);
    await guard.commit(outcome.lease, Buffer.from(`result of ${scope}`));
  };

  try {
    const started = Date.now();
    await forEachLimited(scopes, config.concurrency, async (scope) => {
      const runs = Array.from({ length: config.racers }, (_, i) => invoke(i % 2, scope).catch(() => void failed++));
      await Promise.all(runs);
    });
    const wallMs = Date.now() - started;
    const tally = await tallyDispatches(clients[0], prefix, scopes);
    return { mode: 'core', store: store.name, racers: config.racers, invocations: scopes.length * config.racers, wallMs, failed, ...tally };
  } finally {
    hubs.forEach((h) => h.close());
    await deletePrefix(clients[0], prefix);
    clients.forEach((c) => c.disconnect());
  }
}
