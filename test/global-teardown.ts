/** What the global setups started, stopped last-started first by the teardown. */
interface Stoppable {
  stop(): Promise<void>;
}

/** The services the global setups of this jest run started (shared by both projects). */
export function services(): Stoppable[] {
  const holder = globalThis as { __fireOnceServices?: Stoppable[] };
  holder.__fireOnceServices ??= [];
  return holder.__fireOnceServices;
}

export default async function globalTeardown(): Promise<void> {
  const started = services();
  while (started.length > 0) await started.pop()?.stop();
}
