import type { ArtifactView, Inspection, TtlLeft } from './inspect';
import { CONTROL_CHARACTER, printable, quoted } from './printable';
import { shellQuote } from './shell';
import { formatMs, table } from './table';

/** The human form of an inspection: one small table per lock and per artifact. */
export function formatInspection(view: Inspection): string {
  // A scope with a control character is shown escaped, which a shell does not read back: give the form it does.
  const inShell = CONTROL_CHARACTER.test(view.scope) ? ` (in a shell: ${shellQuote(view.scope)})` : '';
  const lines = [`scope ${quoted(view.scope)}${inShell} in namespace ${quoted(view.namespace)} under prefix ${view.prefix} (Redis time ${view.serverTime})`];
  if (view.locks.length === 0 && view.artifacts.length === 0 && view.otherKeys.length === 0) {
    lines.push(
      'nothing stored for this scope: no lock, parked waiter or artifact (if there should be, check the scope, --prefix and --namespace: fire-once doctor lists the prefixes and namespaces it finds)',
    );
    return lines.join('\n');
  }
  for (const lock of view.locks) {
    const state = !lock.present ? 'free' : lock.foreign ? `holds ${lock.foreign}, not a lock this library writes` : 'held';
    lines.push('', `lock of step ${quoted(lock.step)}: ${state}`);
    const rows: [string, string][] = [['key', lock.key]];
    if (lock.present) {
      rows.push(['holder', lock.holder || '(not recorded)']);
      if (lock.tokenHash) rows.push(['token hash', lock.tokenHash]);
      if (lock.fencingToken !== undefined) rows.push(['fencing token', String(lock.fencingToken)]);
      if (lock.heldMs !== undefined) rows.push(['held for', `${formatMs(lock.heldMs)} (Redis's clock now, minus the fencing token)`]);
      rows.push(['TTL left', ttlText(lock.ttlMs)]);
    }
    if (lock.parkedWaiters > 0) rows.push(['parked waiters', String(lock.parkedWaiters)]);
    lines.push(table([], rows));
  }
  for (const artifact of view.artifacts) {
    const name = artifact.kind === 'artifact' ? 'artifact' : 'external artifact (keys.external)';
    lines.push('', `${name} of job type ${quoted(artifact.jobType)}: ${artifact.present ? 'present' : 'absent'}`);
    const rows: [string, string][] = [['key', artifact.key]];
    if (artifact.present) {
      if (artifact.foreign) rows.push(['value', `a ${artifact.type} that is not an artifact record this library writes`]);
      if (artifact.bytes !== undefined) rows.push(['size', `${artifact.bytes} bytes`]);
      rows.push(['age', ageText(artifact)]);
      rows.push(['TTL left', ttlText(artifact.ttlMs)]);
    }
    lines.push(table([], rows));
  }
  for (const other of view.otherKeys) {
    lines.push(
      '',
      `other key under this scope: ${printable(other.key)} (the guard does not write it; if it is an external artifact your workers name, the guard fast-forwards on it)`,
    );
    lines.push(
      table(
        [],
        [
          ['type', other.type],
          ['TTL left', ttlText(other.ttlMs)],
        ],
      ),
    );
  }
  return lines.join('\n');
}

function ttlText(ttl: TtlLeft | undefined): string {
  if (ttl === undefined) return 'unknown';
  return ttl === null ? 'no expiry' : formatMs(ttl);
}

function ageText(artifact: ArtifactView): string {
  const wrong = artifact.artifactTtlWrong ? '; --artifact-ttl is shorter than its TTL left, or it has none, so it was not written with that TTL' : '';
  if (artifact.ageMs === undefined) {
    return artifact.kind === 'artifact'
      ? `unknown (no committed entry in the dispatch log${wrong || '; pass --artifact-ttl to derive it from the TTL left'})`
      : 'unknown (written by your job, not by the guard)';
  }
  const from = artifact.ageFrom === 'artifact-ttl' ? 'from --artifact-ttl minus TTL left' : 'since its committed entry in the dispatch log';
  return `${formatMs(artifact.ageMs)} (${from}${wrong})`;
}
