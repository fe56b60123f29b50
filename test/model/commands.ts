import fc from 'fast-check';
import type { Redis } from 'ioredis';
import type { FireOnceGuard, Lease } from '../../src';
import { parseArtifact, parseLock } from '../../src/core';
import * as model from './protocol-model';
import { ARTIFACTS, HOLDERS, TARGETS, type ProtocolModel } from './protocol-model';

/**
 * The real system under test: FireOnceGuard on a real Redis, two guards on two connections
 * (two workers), and the leases they handed out, indexed like the model's.
 */
export interface RealSystem {
  readonly redis: Redis;
  readonly guards: readonly FireOnceGuard[];
  readonly leases: Lease[];
  readonly tokens: Set<string>;
  /** Commands actually run (not skipped by `check`), across every run of the test. */
  readonly executed: { count: number };
  /** How often each interesting case came up, across every run: shows what was exercised. */
  readonly stats: Record<string, number>;
}

function note(r: RealSystem, what: string): void {
  r.stats[what] = (r.stats[what] ?? 0) + 1;
}

type Command = fc.AsyncCommand<ProtocolModel, RealSystem>;

const LOCK_TTL_MS = 10 * 60_000; // nothing expires by itself during a run: only `expire` commands end TTLs
const ARTIFACT_TTL_MS = 24 * 60 * 60_000;
export const GUARD_OPTIONS = { lockTtlMs: LOCK_TTL_MS, artifactTtlMs: ARTIFACT_TTL_MS } as const;

const label = (i: number) => `${TARGETS[i].scope}/${TARGETS[i].step}`;
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

function fail(what: string, expected: unknown, actual: unknown): never {
  throw new Error(`divergence in ${what}: model expects ${JSON.stringify(expected)}, Redis says ${JSON.stringify(actual)}`);
}

class Acquire implements Command {
  constructor(
    readonly target: number,
    readonly holder: number,
    readonly via: number,
  ) {}
  check = () => true;
  async run(m: ProtocolModel, r: RealSystem) {
    const holder = HOLDERS[this.holder];
    const prior = m.locks.get(model.lockId(TARGETS[this.target]));
    const expected = model.acquire(m, this.target, holder);
    const afterOwnCommit = expected.kind === 'acquired' && prior === undefined && m.fences.has(model.lockId(TARGETS[this.target]));
    note(
      r,
      afterOwnCommit ? 'acquired again after an earlier holder' : expected.kind === 'held' && expected.sameHolder ? 'held by the same holder' : expected.kind,
    );
    const outcome = await r.guards[this.via].acquire({ ...TARGETS[this.target], holder });
    if (outcome.kind !== expected.kind) fail(`acquire(${label(this.target)}).kind`, expected.kind, outcome.kind);
    if (outcome.kind === 'fast-forward' && expected.kind === 'fast-forward') {
      if (hex(outcome.artifact) !== hex(expected.artifact)) fail('fast-forward artifact', hex(expected.artifact), hex(outcome.artifact));
    } else if (outcome.kind === 'held' && expected.kind === 'held') {
      const { holder: h, sameHolder, fencingToken, ttlMs } = outcome;
      if (h !== expected.holder || sameHolder !== expected.sameHolder || fencingToken !== expected.fencing) {
        fail('held', expected, { holder: h, sameHolder, fencing: fencingToken });
      }
      if (!(ttlMs > 0)) fail('held lock TTL', '> 0', ttlMs);
    } else if (outcome.kind === 'acquired' && expected.kind === 'acquired') {
      const { lease } = outcome;
      const previous = model.recordFencing(m, expected.lease, lease.fencingToken);
      if (!(lease.fencingToken > previous)) fail('fencing token', `> ${previous}`, lease.fencingToken);
      if (r.tokens.has(lease.token)) fail('fresh token', 'a token never seen before', lease.token);
      r.tokens.add(lease.token);
      r.leases[expected.lease.id] = lease;
    }
    r.executed.count++;
    await verifyRedis(m, r);
  }
  toString = () => `acquire(${label(this.target)}, holder ${this.holder}, guard ${this.via})`;
}

/**
 * Commit, release, extend and crash act on one running lease, picked by index among them, or,
 * with `stale`, among the running leases whose lock has expired or passed on (when there are
 * any): a holder that is still working but no longer owns its lock.
 */
abstract class OnLease implements Command {
  constructor(
    readonly pick: number,
    readonly stale: boolean,
  ) {}
  check = (m: Readonly<ProtocolModel>) => model.running(m as ProtocolModel).length > 0;
  protected lease(m: ProtocolModel) {
    const live = model.running(m);
    const stale = live.filter((l) => !model.owns(m, l));
    const pool = this.stale && stale.length > 0 ? stale : live;
    return pool[this.pick % pool.length];
  }
  protected label = () => `${this.stale ? 'stale-preferred ' : ''}running #${this.pick}`;
  abstract run(m: ProtocolModel, r: RealSystem): Promise<void>;
}

class Commit extends OnLease {
  constructor(
    pick: number,
    stale: boolean,
    readonly bytes: Uint8Array,
  ) {
    super(pick, stale);
  }
  override async run(m: ProtocolModel, r: RealSystem) {
    const lease = this.lease(m);
    const expected = model.commit(m, lease, this.bytes);
    note(r, expected.ours ? 'commit' : expected.stored ? 'late commit' : 'refused commit');
    const { ours, stored } = await r.guards[0].commit(r.leases[lease.id], Buffer.from(this.bytes));
    if (ours !== expected.ours || stored !== expected.stored) fail(`commit(lease ${lease.id})`, expected, { ours, stored });
    r.executed.count++;
    await verifyRedis(m, r);
  }
  override toString = () => `commit(${this.label()}, 0x${hex(this.bytes)})`;
}

class Release extends OnLease {
  override async run(m: ProtocolModel, r: RealSystem) {
    const lease = this.lease(m);
    const heldByAnother = m.locks.has(model.lockId(TARGETS[lease.target])) && !model.owns(m, lease);
    const expected = model.release(m, lease);
    note(r, expected ? 'release' : heldByAnother ? 'stale release refused, lock held by another' : 'stale release refused, no lock');
    const actual = (await r.guards[1].release(r.leases[lease.id])).ours;
    if (actual !== expected) fail(`release(lease ${lease.id})`, expected, actual);
    r.executed.count++;
    await verifyRedis(m, r);
  }
  override toString = () => `fail/release(${this.label()})`;
}

class Extend extends OnLease {
  override async run(m: ProtocolModel, r: RealSystem) {
    const lease = this.lease(m);
    const expected = model.extend(m, lease);
    note(r, expected ? 'extend' : 'stale extend refused');
    const actual = await r.guards[0].extend(r.leases[lease.id], LOCK_TTL_MS);
    if (actual !== expected) fail(`extend(lease ${lease.id})`, expected, actual);
    r.executed.count++;
    await verifyRedis(m, r);
  }
  override toString = () => `extend(${this.label()})`;
}

class Crash extends OnLease {
  override async run(m: ProtocolModel, r: RealSystem) {
    model.crash(m, this.lease(m)); // the holder is gone: Redis sees nothing at all
    note(r, 'crash');
    r.executed.count++;
    await verifyRedis(m, r);
  }
  override toString = () => `crash(${this.label()})`;
}

/**
 * Force a TTL to end: PEXPIRE the key to 1 ms, then wait until Redis itself reports it gone.
 * This is Redis's own expiry, brought forward; nothing is deleted by hand.
 */
async function expireNow(redis: Redis, key: string): Promise<void> {
  if ((await redis.pexpire(key, 1)) === 0) return; // no such key
  while ((await redis.exists(key)) === 1) await new Promise((resolve) => setImmediate(resolve));
}

/**
 * The lock's TTL runs out, and with `takeOver` another invocation (holder, guard) acquires at
 * once: the common way a still-running holder goes stale.
 */
class ExpireLock implements Command {
  constructor(
    readonly target: number,
    readonly takeOver: readonly [number, number] | null,
  ) {}
  check = () => true;
  async run(m: ProtocolModel, r: RealSystem) {
    model.expireLock(m, this.target);
    const t = TARGETS[this.target];
    await expireNow(r.redis, r.guards[0].keys.lock(t.scope, t.step));
    r.executed.count++;
    await verifyRedis(m, r);
    if (this.takeOver) await new Acquire(this.target, ...this.takeOver).run(m, r);
  }
  toString = () => `expireLock(${label(this.target)})${this.takeOver ? ` then acquire(holder ${this.takeOver[0]}, guard ${this.takeOver[1]})` : ''}`;
}

class ExpireArtifact implements Command {
  constructor(readonly artifact: number) {}
  check = () => true;
  async run(m: ProtocolModel, r: RealSystem) {
    model.expireArtifact(m, this.artifact);
    const a = ARTIFACTS[this.artifact];
    await expireNow(r.redis, r.guards[0].keys.artifact(a.scope, a.jobType));
    r.executed.count++;
    await verifyRedis(m, r);
  }
  toString = () => `expireArtifact(${ARTIFACTS[this.artifact].scope}/${ARTIFACTS[this.artifact].jobType})`;
}

// Half of all target picks go to one hot lock (and half of the artifact expiries to its
// artifact), so that it is contended, expires under running holders and is taken over by new
// ones: the stale-holder cases need that to come up often.
const target = fc.oneof({ arbitrary: fc.constant(0), weight: 1 }, { arbitrary: fc.nat({ max: TARGETS.length - 1 }), weight: 1 });
const artifact = fc.oneof({ arbitrary: fc.constant(0), weight: 1 }, { arbitrary: fc.nat({ max: ARTIFACTS.length - 1 }), weight: 1 });
const pick = fc.nat({ max: 7 });

const acquireCommand = fc.tuple(target, fc.nat({ max: HOLDERS.length - 1 }), fc.nat({ max: 1 })).map(([t, h, g]) => new Acquire(t, h, g));

/**
 * The command mix: acquires and expiries weigh double, so that locks are contended, leases go
 * stale while their holders still run, and stale holders commit and release.
 */
export const allCommands = [
  acquireCommand,
  acquireCommand,
  fc.tuple(pick, fc.boolean(), fc.uint8Array({ minLength: 0, maxLength: 12 })).map(([p, s, b]) => new Commit(p, s, b)),
  fc.tuple(pick, fc.boolean()).map(([p, s]) => new Release(p, s)),
  fc.tuple(pick, fc.boolean()).map(([p, s]) => new Extend(p, s)),
  fc.tuple(pick, fc.boolean()).map(([p, s]) => new Crash(p, s)),
  fc.tuple(target, fc.option(fc.tuple(fc.nat({ max: HOLDERS.length - 1 }), fc.nat({ max: 1 })))).map(([t, next]) => new ExpireLock(t, next)),
  fc.tuple(target, fc.option(fc.tuple(fc.nat({ max: HOLDERS.length - 1 }), fc.nat({ max: 1 })))).map(([t, next]) => new ExpireLock(t, next)),
  artifact.map((a) => new ExpireArtifact(a)),
  artifact.map((a) => new ExpireArtifact(a)),
];

/**
 * After every command, read every key the model knows about in one pipeline and compare: the
 * lock record (token, fencing token, args hash, holder) and its TTL, the artifact record's bytes
 * and its TTL. A lock without a TTL, or a commit that left its own lock behind, shows up here.
 */
export async function verifyRedis(m: ProtocolModel, r: RealSystem): Promise<void> {
  const keys = r.guards[0].keys;
  const pipe = r.redis.pipeline();
  for (const t of TARGETS) pipe.get(keys.lock(t.scope, t.step)).pttl(keys.lock(t.scope, t.step));
  for (const a of ARTIFACTS) pipe.getBuffer(keys.artifact(a.scope, a.jobType)).pttl(keys.artifact(a.scope, a.jobType));
  const replies = ((await pipe.exec()) ?? []).map(([err, value]) => {
    if (err) throw err;
    return value;
  });
  TARGETS.forEach((t, i) => {
    const [value, pttl] = replies.slice(i * 2, i * 2 + 2) as [string | null, number];
    const lock = m.locks.get(model.lockId(t));
    const where = `lock ${t.scope}/${t.step}`;
    if (lock === undefined) {
      if (value !== null) fail(where, 'no lock', value);
    } else {
      const lease = m.leases[lock.leaseId];
      const want = { token: r.leases[lock.leaseId].token, fencingToken: lease.fencing, argsHash: '', holder: lease.holder };
      const got = value === null ? undefined : parseLock(value);
      if (JSON.stringify(got) !== JSON.stringify(want)) fail(where, want, value);
      if (!(pttl > 0)) fail(`${where} TTL`, '> 0', pttl);
    }
  });
  const base = TARGETS.length * 2;
  ARTIFACTS.forEach((a, i) => {
    const [value, pttl] = replies.slice(base + i * 2, base + i * 2 + 2) as [Buffer | null, number];
    const bytes = m.artifacts.get(model.artifactId(a));
    const where = `artifact ${a.scope}/${a.jobType}`;
    if (bytes === undefined) {
      if (value !== null) fail(where, 'no artifact', hex(value));
    } else {
      const record = value === null ? undefined : parseArtifact(value);
      if (record === undefined || hex(record.payload) !== hex(bytes) || record.argsHash !== '')
        fail(where, { payload: hex(bytes), argsHash: '' }, value && hex(value));
      if (!(pttl > 0)) fail(`${where} TTL`, '> 0', pttl);
    }
  });
}
