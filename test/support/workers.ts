import type { ChildProcess } from 'node:child_process';
import { startScript } from './scripts';

/** A worker running in a child process of its own. */
export interface WorkerProcess {
  readonly child: ChildProcess;
  /** Everything it wrote to stdout so far, from its first byte (READY and what came before it included). */
  stdout(): string;
  /** Everything it wrote to stderr so far, for failure messages. */
  stderr(): string;
  stop(): Promise<void>;
}

/**
 * Start a TypeScript worker script in a child node process and wait for it to print READY.
 * Rejects with the child's output if it exits first or does not get ready in time.
 */
export async function spawnWorker(script: string, env: Record<string, string>, readyTimeoutMs = 90_000): Promise<WorkerProcess> {
  const worker = startScript(script, [], env);
  try {
    await worker.waitFor('READY', readyTimeoutMs);
  } catch (err) {
    worker.child.kill('SIGKILL');
    throw err;
  }
  return { child: worker.child, stdout: worker.stdout, stderr: worker.stderr, stop: worker.stop };
}
