import { execFileSync } from 'node:child_process';
import { availableParallelism, cpus, loadavg } from 'node:os';
import type { Redis } from 'ioredis';

/** Where and on what the numbers were measured. */
export interface MachineInfo {
  readonly nproc: number;
  readonly cpuModel: string;
  /** `free -h` as printed. */
  readonly free: string;
  readonly node: string;
  readonly redis: string;
  /** 1, 5 and 15 minute load averages when the bench started: the machine is shared. */
  readonly loadAverage: readonly number[];
  /** The commit the bench ran on, and the src/ files that differed from it. */
  readonly gitHead: string;
  readonly srcChanges: readonly string[];
}

function run(command: string, args: readonly string[]): string {
  try {
    return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trimEnd();
  } catch {
    return `(${command} failed)`;
  }
}

/**
 * Describe this machine, the Redis the bench talks to and the state of src/, for RESULTS.md.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * import { describeMachine } from './machine';
 * void describeMachine(new Redis({ lazyConnect: true })).then((m) => console.log(m.nproc));
 * ```
 */
export async function describeMachine(redis: Redis): Promise<MachineInfo> {
  const info = await redis.info('server');
  const status = run('git', ['status', '--porcelain', '--', 'src']);
  return {
    nproc: availableParallelism(),
    cpuModel: cpus()[0]?.model ?? 'unknown',
    free: run('free', ['-h']),
    node: process.version,
    redis: /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown',
    loadAverage: loadavg().map((l) => Math.round(l * 100) / 100),
    gitHead: run('git', ['rev-parse', '--short', 'HEAD']),
    srcChanges: status === '' ? [] : status.split('\n'),
  };
}
