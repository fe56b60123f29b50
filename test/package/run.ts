import { spawn } from 'node:child_process';

/** What a finished child process printed. */
export interface RunOutput {
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * The environment for child processes: ours without the `npm_*` variables that `npm test` sets.
 * They carry the parent's `npm_config_local_prefix`, which would make an `npm install` in the
 * consumer project act on this repository instead.
 */
export function childEnv(extra: Readonly<Record<string, string>> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!/^npm_/i.test(name)) env[name] = value;
  }
  return { ...env, ...extra };
}

/**
 * Run a command to completion. Rejects, with the command, its exit and the tail of its output,
 * when it exits non-zero or outlives `timeoutMs`.
 */
export function run(
  command: string,
  args: readonly string[],
  options: { readonly cwd: string; readonly env?: NodeJS.ProcessEnv; readonly timeoutMs?: number },
): Promise<RunOutput> {
  const timeoutMs = options.timeoutMs ?? 120_000;
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env ?? childEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`${command} ${args.join(' ')} did not start: ${err.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) return resolve({ stdout, stderr });
      const how = timedOut ? `timed out after ${timeoutMs} ms` : `exited with ${code ?? signal}`;
      reject(new Error(`\`${command} ${args.join(' ')}\` in ${options.cwd} ${how}\n--- stdout\n${tail(stdout)}\n--- stderr\n${tail(stderr)}`));
    });
  });
}

function tail(text: string, max = 6_000): string {
  return text.length > max ? `…${text.slice(-max)}` : text;
}

/** The last line of `stdout` parsed as JSON: the consumer scripts report their results that way. */
export function lastJsonLine<T>(output: RunOutput): T {
  const lines = output.stdout.trim().split('\n');
  try {
    return JSON.parse(lines[lines.length - 1] ?? '') as T;
  } catch {
    throw new Error(`expected a JSON line last on stdout, got:\n${tail(output.stdout)}\n--- stderr\n${tail(output.stderr)}`);
  }
}
