/**
 * Run `task` for every item, at most `limit` at a time. After a task throws no new one starts;
 * the call rejects with that error once the tasks already running have settled, so nothing is
 * left running against services the caller is about to stop.
 */
export async function forEachLimited<T>(items: readonly T[], limit: number, task: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: { readonly error: unknown } | undefined;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length && !failure) {
      const index = next++;
      try {
        await task(items[index], index);
      } catch (error) {
        failure ??= { error };
      }
    }
  });
  await Promise.all(lanes);
  if (failure) throw failure.error;
}
