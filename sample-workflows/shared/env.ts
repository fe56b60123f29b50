/**
 * Where the samples find their services when run by hand. The jest global setup and the demo
 * set these variables to the services they started; run by hand, the defaults match
 * `redis-server` and `temporal server start-dev` on their standard ports.
 */

/** `REDIS_URL`, else a local redis-server on its default port. */
export function redisUrl(): string {
  return process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
}

/** `TEMPORAL_ADDRESS`, else a local Temporal dev server on its default port. */
export function temporalAddress(): string {
  return process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233';
}

/** A non-negative integer from the environment, or `fallback` when the variable is unset. */
export function intFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) {
    throw new Error(`${name} must be a non-negative integer (got ${JSON.stringify(raw)})`);
  }
  return value;
}

/**
 * Run `main` as the process's body. A number it resolves to becomes the exit code, and the
 * process ends by itself once everything is closed; a failure is printed and exits with 1.
 *
 * @example
 * ```ts
 * if (require.main === module) runMain(async () => console.log('hello'));
 * ```
 */
export function runMain(main: () => Promise<number | void>): void {
  main().then(
    (code) => {
      process.exitCode = code ?? 0;
    },
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
