import { spawn, type ChildProcess } from 'node:child_process';
import { join, resolve } from 'node:path';
import { stopChild } from '../../sample-workflows/services';

const ROOT = join(__dirname, '..', '..');

/** What a script that ran to its end did. */
export interface ScriptRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** A script still running in a child process. */
export interface RunningScript {
  readonly child: ChildProcess;
  /** Everything it wrote so far. */
  stdout(): string;
  stderr(): string;
  /** Resolve once its stdout contains `text`; reject if it exits first or `timeoutMs` passes. */
  waitFor(text: string, timeoutMs?: number): Promise<void>;
  /** Ctrl-C: send SIGINT and resolve its exit code. */
  interrupt(): Promise<number | null>;
  /** SIGTERM, then SIGKILL if it lingers; for clean-up. */
  stop(): Promise<void>;
}

/**
 * Start a TypeScript script (a path from the repository's root, or absolute) in a child node
 * process, as `npx tsx <script>` would, with `env` over this process's
 * environment. A variable set to `undefined` is removed.
 */
export function startScript(script: string, args: readonly string[] = [], env: Record<string, string | undefined> = {}): RunningScript {
  const childEnv: Record<string, string | undefined> = { ...process.env, ...env };
  for (const key of Object.keys(childEnv)) if (childEnv[key] === undefined) delete childEnv[key];
  const child = spawn(process.execPath, ['--import', 'tsx', resolve(ROOT, script), ...args], {
    cwd: ROOT,
    env: childEnv as NodeJS.ProcessEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    waitFor(text, timeoutMs = 90_000) {
      return new Promise((resolve, reject) => {
        const check = (): void => {
          if (!stdout.includes(text)) return;
          done();
          resolve();
        };
        const onExit = (code: number | null): void => {
          done();
          reject(new Error(`${script} exited with ${code} before printing ${JSON.stringify(text)}\nstdout: ${stdout}\nstderr: ${stderr}`));
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`${script} did not print ${JSON.stringify(text)} within ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`));
        }, timeoutMs);
        const done = (): void => {
          clearTimeout(timer);
          child.stdout?.off('data', check);
          child.off('close', onExit);
        };
        child.stdout?.on('data', check);
        child.once('close', onExit);
        check();
      });
    },
    async interrupt() {
      child.kill('SIGINT');
      return await exited;
    },
    stop: () => stopChild(child),
  };
}

/** Run a TypeScript script of this repository to its end; see {@link startScript}. */
export async function runScript(
  script: string,
  args: readonly string[] = [],
  env: Record<string, string | undefined> = {},
  timeoutMs = 120_000,
): Promise<ScriptRun> {
  const running = startScript(script, args, env);
  const timer = setTimeout(() => running.child.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((resolve) => running.child.once('close', resolve));
  clearTimeout(timer);
  if (running.child.signalCode === 'SIGKILL') {
    throw new Error(`${script} ${args.join(' ')} did not exit within ${timeoutMs} ms\nstdout: ${running.stdout()}\nstderr: ${running.stderr()}`);
  }
  return { code, stdout: running.stdout(), stderr: running.stderr() };
}
