import { spawnWorker, type WorkerProcess } from '../workers';

/** One entry the worker logged (see fixtures/worker-process.ts). */
export interface LogLine {
  readonly level: string;
  readonly message: string;
  readonly meta?: Record<string, unknown>;
}

/** A fault-suite worker process: its pid, everything it logged, and ways to hurt it. */
export interface FaultWorker extends WorkerProcess {
  readonly pid: number;
  logs(): LogLine[];
  /** Send a signal (SIGKILL, SIGSTOP, SIGCONT); SIGKILL resolves once the process is gone. */
  signal(signal: NodeJS.Signals): Promise<void>;
  readonly exited: boolean;
}

/** What a worker needs beyond the defaults: see fixtures/worker-process.ts for every variable. */
export interface FaultWorkerEnv {
  readonly TEMPORAL_ADDRESS: string;
  readonly TASK_QUEUE: string;
  readonly REDIS_URL: string;
  readonly KEY_PREFIX: string;
  readonly COUNTER_REDIS_URL?: string;
  readonly LEASE_MS?: string;
  readonly STORE_TIMEOUT_MS?: string;
  readonly POLL_INTERVAL_MS?: string;
  readonly STICKY_TIMEOUT_MS?: string;
  readonly LOG_LEVEL?: string;
  readonly ALLOW_EVICTING_REDIS?: '1';
}

const SCRIPT = 'test/faults/fixtures/worker-process.ts';

/** Start a worker process on the prebuilt bundle of fixtures/workflows.ts; resolves once it polls. */
export async function startFaultWorker(env: FaultWorkerEnv): Promise<FaultWorker> {
  const bundle = process.env.FAULTS_WORKFLOW_BUNDLE;
  if (!bundle) throw new Error('FAULTS_WORKFLOW_BUNDLE is not set: run the fault suites through `npm run test:faults`');
  const vars: Record<string, string> = { WORKFLOW_BUNDLE: bundle };
  for (const [name, value] of Object.entries(env)) if (value !== undefined) vars[name] = value;
  const proc = await spawnWorker(SCRIPT, vars);
  const child = proc.child;
  return {
    ...proc,
    pid: child.pid as number,
    // Parsed from everything the process wrote, not from a listener attached once it was READY:
    // a line that came in the same chunk as READY (the eviction warning at start) would be lost.
    logs: () => logLines(proc.stdout()),
    get exited() {
      return child.exitCode !== null || child.signalCode !== null;
    },
    signal: (signal) => {
      if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
      if (signal !== 'SIGKILL') {
        child.kill(signal);
        return Promise.resolve();
      }
      return new Promise((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGKILL');
      });
    },
  };
}

/** Stop every worker that is still running (SIGCONT first, in case one was frozen). */
export async function stopAll(workers: readonly FaultWorker[]): Promise<void> {
  await Promise.all(
    workers.map(async (w) => {
      if (w.exited) return;
      w.child.kill('SIGCONT');
      await w.stop();
    }),
  );
}

/** The `LOG {json}` lines of a worker's stdout; a partial last line is left for the next read. */
function logLines(stdout: string): LogLine[] {
  const lines = stdout.split('\n');
  lines.pop();
  return lines
    .filter((line) => line.startsWith('LOG '))
    .map((line) => {
      try {
        return JSON.parse(line.slice(4)) as LogLine;
      } catch {
        return { level: 'UNPARSED', message: line };
      }
    });
}
