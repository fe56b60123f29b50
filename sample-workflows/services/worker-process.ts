import type { NativeConnection, Worker } from '@temporalio/worker';

/** A required environment variable of a worker process; throws naming it when it is unset. */
export function requiredEnv(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

/** A built worker, and what to close once it has stopped. */
export interface ServedWorker {
  readonly worker: Worker;
  readonly connection: NativeConnection;
  /** Redis clients and the like, disconnected after the worker and its connection. */
  readonly clients: readonly { disconnect(): void }[];
}

/**
 * The child side of a spawned worker process (the parent waits for `READY`): build the worker,
 * print `READY`, run until SIGTERM shuts it down, then close its connection and clients. A
 * failure is printed to stderr and exits the process with 1.
 */
export function serveWorkerProcess(build: () => Promise<ServedWorker>): void {
  const serve = async () => {
    const { worker, connection, clients } = await build();
    process.on('SIGTERM', () => worker.shutdown());
    process.stdout.write('READY\n');
    await worker.run();
    await connection.close();
    for (const client of clients) client.disconnect();
  };
  serve().catch((err: unknown) => {
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  });
}
