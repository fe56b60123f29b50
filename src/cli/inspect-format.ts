import type { ArtifactView, Inspection, TtlLeft } from './inspect';
import { formatMs, table } from './table';

/** The human form of an inspection: one small table per lock and per artifact. */
export function formatInspection(view: Inspection): string {
  const lines = [`scope ${JSON.stringify(view.scope)} under prefix ${view.prefix} (Redis time ${view.serverTime})`];
  if (view.locks.length === 0 && view.artifacts.length === 0) {
    lines.push('nothing stored for this scope: no lock, fencing counter or artifact');
    return lines.join('\n');
  }
  for (const lock of view.locks) {
    const fence = view.fences.find((f) => f.step === lock.step);
    const state = !lock.present ? 'free' : lock.committed ? 'held, committed (its artifact was stored; it stops blocking once that is gone)' : 'held';
    lines.push('', `lock of step ${JSON.stringify(lock.step)}: ${state}`);
    const rows: [string, string][] = [['key', lock.key]];
    if (lock.present) {
      rows.push(['holder', lock.holder || '(not recorded)']);
      if (lock.tokenHash) rows.push(['token hash', lock.tokenHash]);
      if (lock.fencingToken !== undefined) rows.push(['fencing token', String(lock.fencingToken)]);
      if (lock.type !== 'hash') rows.push(['type', `${lock.type} (not the guard's hash layout)`]);
      rows.push(['TTL left', ttlText(lock.ttlMs)]);
    }
    if (fence) rows.push(['fencing counter', fence.value === null ? 'none' : `${fence.value} (TTL left ${ttlText(fence.ttlMs)})`]);
    lines.push(table([], rows));
  }
  for (const artifact of view.artifacts) {
    const name = artifact.kind === 'artifact' ? 'artifact' : 'external artifact (keys.external)';
    lines.push('', `${name} of job type ${JSON.stringify(artifact.jobType)}: ${artifact.present ? 'present' : 'absent'}`);
    const rows: [string, string][] = [['key', artifact.key]];
    if (artifact.present) {
      if (artifact.bytes !== undefined) rows.push(['size', `${artifact.bytes} bytes`]);
      rows.push(['age', ageText(artifact)]);
      rows.push(['TTL left', ttlText(artifact.ttlMs)]);
    }
    lines.push(table([], rows));
  }
  return lines.join('\n');
}

function ttlText(ttl: TtlLeft | undefined): string {
  if (ttl === undefined) return 'unknown';
  return ttl === null ? 'no expiry' : formatMs(ttl);
}

function ageText(artifact: ArtifactView): string {
  if (artifact.ageMs === undefined) {
    return artifact.kind === 'artifact'
      ? 'unknown (no committed entry in the dispatch log; pass --artifact-ttl to derive it from the TTL left)'
      : 'unknown (written by your job, not by the guard)';
  }
  const from = artifact.ageFrom === 'artifact-ttl' ? 'from --artifact-ttl minus TTL left' : 'since its committed entry in the dispatch log';
  return `${formatMs(artifact.ageMs)} (${from})`;
}
