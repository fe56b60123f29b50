/**
 * A small, pure model of the fire-once protocol on one Redis: who holds each lock, which
 * artifacts exist, and the fencing counter of each lock. No Redis, no timers: the model test
 * runs random command sequences against FireOnceGuard and this model side by side.
 *
 * The targets are fixed and few, so that random sequences collide on the same locks often.
 * Two steps share a job type (`notify` and `resend` both produce `notice`), so an artifact can
 * end a step that never held its lock, and one scope carries characters that keys must encode.
 */

/** One (scope, step, jobType) the model and the guard both know. */
export interface TargetSpec {
  readonly scope: string;
  readonly step: string;
  readonly jobType: string;
}

const SCOPES = ['session-1', 'chat:7*{x}'] as const;
const STEPS = [
  { step: 'dispatch', jobType: 'summary' },
  { step: 'notify', jobType: 'notice' },
  { step: 'resend', jobType: 'notice' },
] as const;

export const TARGETS: readonly TargetSpec[] = SCOPES.flatMap((scope) => STEPS.map((s) => ({ scope, ...s })));

/** Every (scope, jobType) that has an artifact key, in a fixed order. */
export const ARTIFACTS: readonly { readonly scope: string; readonly jobType: string }[] = SCOPES.flatMap((scope) =>
  [...new Set(STEPS.map((s) => s.jobType))].map((jobType) => ({ scope, jobType })),
);

/** Who asks. Two attempts of one activity share a holder; the third is a stranger. */
export const HOLDERS = ['wf-a run-1 act-1', 'wf-a run-2 act-1', 'wf-b run-1 act-1'] as const;

export const lockId = (t: TargetSpec): string => JSON.stringify([t.scope, t.step]);
export const artifactId = (a: { readonly scope: string; readonly jobType: string }): string => JSON.stringify([a.scope, a.jobType]);

/** What a lease is doing: still in its activity, or settled one way or the other. */
export type LeaseStatus = 'running' | 'committed' | 'released' | 'crashed';

export interface ModelLease {
  readonly id: number;
  readonly target: number;
  readonly holder: string;
  /** Set from the real acquire: tokens come from the server clock, so only their order is modelled. */
  fencing: number;
  status: LeaseStatus;
}

/** A lock in Redis: whose token it holds. (A commit deletes its own lock.) */
export interface ModelLock {
  readonly leaseId: number;
}

export interface ProtocolModel {
  /** lockId → the lock. Absent: no lock. */
  readonly locks: Map<string, ModelLock>;
  /** lockId → the last fencing token handed out: every later one must be greater. */
  readonly fences: Map<string, number>;
  /** artifactId → the artifact bytes. Absent: no artifact. */
  readonly artifacts: Map<string, Uint8Array>;
  /** Every lease ever acquired, by id. */
  readonly leases: ModelLease[];
  /**
   * Deliberate flaws, used only by the test that checks this model test can fail at all.
   * `releaseIgnoresToken`: release deletes the lock whoever holds it (a plain DEL).
   */
  readonly flaws: { readonly releaseIgnoresToken?: boolean };
}

export function emptyModel(flaws: ProtocolModel['flaws'] = {}): ProtocolModel {
  return { locks: new Map(), fences: new Map(), artifacts: new Map(), leases: [], flaws };
}

/** What acquire must answer. */
export type ExpectedAcquire =
  | { readonly kind: 'fast-forward'; readonly artifact: Uint8Array }
  | { readonly kind: 'acquired'; readonly lease: ModelLease }
  | { readonly kind: 'held'; readonly holder: string; readonly sameHolder: boolean; readonly fencing: number };

/**
 * Artifact first; else a live lock; else take the lock. The new lease's fencing token is set by
 * {@link recordFencing} from the real answer, which must exceed every earlier one of the lock.
 */
export function acquire(m: ProtocolModel, target: number, holder: string): ExpectedAcquire {
  const t = TARGETS[target];
  const artifact = m.artifacts.get(artifactId(t));
  if (artifact !== undefined) return { kind: 'fast-forward', artifact };
  const held = m.locks.get(lockId(t));
  if (held !== undefined) {
    const lease = m.leases[held.leaseId];
    return { kind: 'held', holder: lease.holder, sameHolder: lease.holder === holder, fencing: lease.fencing };
  }
  const lease: ModelLease = { id: m.leases.length, target, holder, fencing: Number.NaN, status: 'running' };
  m.locks.set(lockId(t), { leaseId: lease.id });
  m.leases.push(lease);
  return { kind: 'acquired', lease };
}

/**
 * Record the fencing token Redis handed `lease`. Returns the last one handed out for the same
 * lock before it, which the new one must exceed.
 */
export function recordFencing(m: ProtocolModel, lease: ModelLease, fencing: number): number {
  const previous = m.fences.get(lockId(TARGETS[lease.target])) ?? 0;
  lease.fencing = fencing;
  m.fences.set(lockId(TARGETS[lease.target]), fencing);
  return previous;
}

/** Whether the lock of `lease`'s target still holds `lease`'s token. */
export function owns(m: ProtocolModel, lease: ModelLease): boolean {
  return m.locks.get(lockId(TARGETS[lease.target]))?.leaseId === lease.id;
}

/**
 * Success. While the lock is ours the artifact is written and the lock deleted in the same step,
 * so the artifact takes over with no gap. A late holder (its lock expired or was taken) writes
 * only into an empty slot: no lock and no artifact, or its very record already there. Otherwise
 * the commit is refused and nothing changes: a newer holder's lock or result stands.
 */
export function commit(m: ProtocolModel, lease: ModelLease, bytes: Uint8Array): { readonly ours: boolean; readonly stored: boolean } {
  const stillOurs = owns(m, lease);
  const t = TARGETS[lease.target];
  const current = m.artifacts.get(artifactId(t));
  const emptySlot = !m.locks.has(lockId(t)) && (current === undefined || Buffer.from(current).equals(Buffer.from(bytes)));
  lease.status = 'committed';
  if (!stillOurs && !emptySlot) return { ours: false, stored: false };
  m.artifacts.set(artifactId(t), bytes);
  if (stillOurs) m.locks.delete(lockId(t));
  return { ours: stillOurs, stored: true };
}

/** Failure: compare-and-delete. A stale holder's release is refused and changes nothing. */
export function release(m: ProtocolModel, lease: ModelLease): boolean {
  const stillOurs = owns(m, lease);
  if (stillOurs || m.flaws.releaseIgnoresToken) m.locks.delete(lockId(TARGETS[lease.target]));
  lease.status = 'released';
  return stillOurs;
}

/** Compare-and-expire: true only for the holder; nothing else changes. */
export function extend(m: ProtocolModel, lease: ModelLease): boolean {
  return owns(m, lease);
}

/** The holder disappears: it never commits, releases or extends again. Redis is untouched. */
export function crash(_m: ProtocolModel, lease: ModelLease): void {
  lease.status = 'crashed';
}

/** The lock's TTL runs out. Its last fencing token stays the floor for the next one. */
export function expireLock(m: ProtocolModel, target: number): void {
  m.locks.delete(lockId(TARGETS[target]));
}

/** The artifact's TTL runs out. */
export function expireArtifact(m: ProtocolModel, artifact: number): void {
  m.artifacts.delete(artifactId(ARTIFACTS[artifact]));
}

/** Leases still inside their activity: the only ones that can commit, release, extend or crash. */
export function running(m: ProtocolModel): ModelLease[] {
  return m.leases.filter((l) => l.status === 'running');
}
