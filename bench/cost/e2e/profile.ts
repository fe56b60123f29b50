import { mkdirSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';

/** The parts of a V8 CPU profile (`Profiler.stop`) read here. */
interface CpuProfile {
  readonly nodes: readonly { readonly id: number; readonly callFrame: { readonly functionName: string; readonly url: string } }[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

/** Main-thread time per activity, in microseconds, spent in one origin's own code, by kind. */
export interface OriginTime {
  readonly origin: string;
  readonly us: Readonly<Record<string, number>>;
}

const SOCKET_WRITES = new Set(['writeUtf8String', 'writeBuffer', 'writev', 'writeLatin1String']);

/**
 * Where a sampled frame's code lives: this package's `dist/core` or `dist/worker`, a package under
 * node_modules, Node itself, the socket writes (the system calls), the garbage collector, or
 * other native code.
 */
function originOf({ functionName, url }: { functionName: string; url: string }): string {
  const ours = /\/dist\/(core|worker|common)\//.exec(url);
  if (ours) return `temporal-fire-once ${ours[1]}`;
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1];
  if (url.startsWith('node:')) return 'node';
  if (SOCKET_WRITES.has(functionName)) return 'socket writes (system calls)';
  if (functionName === '(garbage collector)' || functionName === '(idle)' || functionName === '(program)') return functionName;
  return url === '' ? 'native' : 'other JS';
}

/** Self time per origin over `activities`, in microseconds per activity. */
function timeByOrigin(profile: CpuProfile, activities: number): Map<string, number> {
  const origins = new Map(profile.nodes.map((node) => [node.id, originOf(node.callFrame)]));
  const time = new Map<string, number>();
  profile.samples.forEach((id, i) => {
    const origin = origins.get(id) ?? 'native';
    time.set(origin, (time.get(origin) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  for (const [origin, total] of time) time.set(origin, total / activities);
  return time;
}

/**
 * Profile the main thread while `run(kind)` runs each kind in turn (it resolves how many
 * activities it ran), write one `e2e-<kind>.cpuprofile` per kind into `dir`, and return the time
 * per activity by origin, idle left out, most of it first. The profiler samples wall time: a
 * system call preempted on a busy machine counts in full, so read the rows against each other.
 */
export async function profileByOrigin<K extends string>(kinds: readonly K[], run: (kind: K) => Promise<number>, dir: string): Promise<OriginTime[]> {
  mkdirSync(dir, { recursive: true });
  const session = new Session();
  session.connect();
  const perKind = new Map<K, Map<string, number>>();
  try {
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 100 });
    for (const kind of kinds) {
      await session.post('Profiler.start');
      const activities = await run(kind);
      const { profile } = await session.post('Profiler.stop');
      writeFileSync(join(dir, `e2e-${kind}.cpuprofile`), JSON.stringify(profile));
      perKind.set(kind, timeByOrigin(profile as unknown as CpuProfile, Math.max(activities, 1)));
    }
  } finally {
    session.disconnect();
  }
  const origins = new Set([...perKind.values()].flatMap((times) => [...times.keys()]));
  origins.delete('(idle)');
  const rows = [...origins].map((origin) => ({ origin, us: Object.fromEntries(kinds.map((kind) => [kind, perKind.get(kind)?.get(origin) ?? 0])) }));
  return rows.sort((a, b) => (b.us[kinds[0]] ?? 0) - (a.us[kinds[0]] ?? 0));
}
