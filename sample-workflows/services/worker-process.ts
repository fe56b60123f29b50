import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
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

/**
 * The parent side: start a TypeScript worker script (one that calls {@link serveWorkerProcess})
 * in a child node process with `env` over this process's environment, and resolve once it prints
 * `READY`. Its stderr goes to this process's. Rejects if it exits first.
 */
export function startWorkerProcess(script: string, env: Record<string, string>): Promise<ChildProcess> {
  const root = join(__dirname, '..', '..');
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => chunk.toString().includes('READY') && resolve(child));
    child.once('exit', (code) => reject(new Error(`worker process ${script} exited with ${code} before it was ready`)));
  });
}
