import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { stopChild } from '../../sample-workflows/services';

/** A worker running in a child process of its own. */
export interface WorkerProcess {
  readonly child: ChildProcess;
  /** Everything it wrote to stderr so far, for failure messages. */
  stderr(): string;
  stop(): Promise<void>;
}

const ROOT = join(__dirname, '..', '..');

/**
 * Start a TypeScript worker script in a child node process and wait for it to print READY.
 * Rejects with the child's stderr if it exits first or does not get ready in time.
 */
export function spawnWorker(script: string, env: Record<string, string>, readyTimeoutMs = 90_000): Promise<WorkerProcess> {
  const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', script], {
    cwd: ROOT,
    env: { ...process.env, ...env, TS_NODE_PROJECT: join(ROOT, 'tsconfig.json') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const handle: WorkerProcess = { child, stderr: () => stderr, stop: () => stopChild(child) };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`worker ${script} was not ready after ${readyTimeoutMs} ms:\n${stderr}`));
    }, readyTimeoutMs);
    child.stdout?.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('READY')) {
        clearTimeout(timer);
        resolve(handle);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`worker ${script} exited with ${code} before it was ready:\n${stderr}`));
    });
  });
}
