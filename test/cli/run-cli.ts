import { join } from 'node:path';
import { runScript, type ScriptRun } from '../support/scripts';

/** What one CLI process did. */
export type CliRun = ScriptRun;

/**
 * Run `fire-once <args>` as its own process, from the TypeScript sources (so the test needs no
 * build and never races one), with `REDIS_URL` unset unless `env` sets it: every test names its
 * Redis with `--redis`.
 */
export function runCli(args: readonly string[], env: Record<string, string | undefined> = {}, timeoutMs = 60_000): Promise<CliRun> {
  return runScript(join('src', 'cli', 'main.ts'), args, { REDIS_URL: undefined, ...env }, timeoutMs);
}
