import { spawn } from 'node:child_process';
import { join } from 'node:path';

/** What one CLI process did. */
export interface CliRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

const ROOT = join(__dirname, '..', '..');

/**
 * Run `fire-once <args>` as its own process, from the TypeScript sources (so the test needs no
 * build and never races one), with `REDIS_URL` unset unless `env` sets it: every test names its
 * Redis with `--redis`.
 */
export function runCli(args: readonly string[], env: Record<string, string | undefined> = {}, timeoutMs = 60_000): Promise<CliRun> {
  const childEnv: Record<string, string | undefined> = { ...process.env, REDIS_URL: undefined, TS_NODE_PROJECT: join(ROOT, 'tsconfig.json'), ...env };
  for (const key of Object.keys(childEnv)) if (childEnv[key] === undefined) delete childEnv[key];
  const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', join(ROOT, 'src', 'cli', 'main.ts'), ...args], {
    cwd: ROOT,
    env: childEnv as NodeJS.ProcessEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`fire-once ${args.join(' ')} did not exit within ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, timeoutMs);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
