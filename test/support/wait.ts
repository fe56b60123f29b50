import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Poll `check` every 10 ms until it resolves `true`. Throws when `timeoutMs` passes first,
 * saying what was awaited.
 */
export async function waitUntil(what: string, check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`gave up after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
}
