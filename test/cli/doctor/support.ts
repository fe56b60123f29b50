import { Redis } from 'ioredis';
import type { DoctorReport } from '../../../src/cli/doctor/doctor';
import type { Verdict } from '../../../src/cli/doctor/verdict';
import { main } from '../../../src/cli/main';
import { spawnRedisServer, type SpawnedRedis } from '../../support/redis-server';

/** What one in-process `fire-once doctor` run printed and returned. */
export interface DoctorRun {
  readonly code: number;
  readonly out: string;
  readonly err: string;
}

/** Run `fire-once doctor --redis url ...args` in this process (main() with captured output). */
export async function doctor(url: string, args: readonly string[] = []): Promise<DoctorRun> {
  let out = '';
  let err = '';
  const code = await main(['node', 'fire-once', 'doctor', '--redis', url, ...args], { out: (t) => (out += t), err: (t) => (err += t) });
  return { code, out, err };
}

/** `doctor --json`: the report, with the exit code checked against the one the report states. */
export async function doctorJson(url: string, args: readonly string[] = []): Promise<DoctorReport> {
  const run = await doctor(url, ['--json', ...args]);
  if (run.err !== '') throw new Error(`doctor wrote to stderr: ${run.err}`);
  const report = JSON.parse(run.out) as DoctorReport;
  if (report.exitCode !== run.code) throw new Error(`doctor exited ${run.code} but its report says ${report.exitCode}`);
  return report;
}

/** The verdicts of one check, as `status: message` for readable failures. */
export function verdictsOf(report: DoctorReport, check: Verdict['check']): Verdict[] {
  return report.verdicts.filter((v) => v.check === check);
}

/** `check` → status, for every verdict of a single-primary report. */
export function statuses(report: DoctorReport): Record<string, string> {
  return Object.fromEntries(report.verdicts.map((v) => [v.check, v.status]));
}

/** A spawned redis-server and an admin client on it, for tests that change its settings. */
export interface ServerWithAdmin {
  readonly server: SpawnedRedis;
  readonly admin: Redis;
  /** The server's process ID (from INFO), to freeze it with SIGSTOP. */
  pid(): Promise<number>;
  stop(): Promise<void>;
}

/** Spawn a redis-server with `args` (after the helper's `--appendonly no`, so they override it). */
export async function serverWith(...args: string[]): Promise<ServerWithAdmin> {
  const server = await spawnRedisServer(args);
  const admin = new Redis(server.url);
  return {
    server,
    admin,
    pid: async () => Number(/process_id:(\d+)/.exec(await admin.info('server'))?.[1]),
    stop: async () => {
      admin.disconnect();
      await server.stop();
    },
  };
}

/** The settings of a Redis that `doctor` passes: AOF with fsync on every write, noeviction. */
export const SAFE_ARGS = ['--appendonly', 'yes', '--appendfsync', 'always', '--maxmemory-policy', 'noeviction'];
